package scenario

import (
	"slices"
	"strings"
	"testing"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/versions"
)

// Every held cell has a mutation, and each mutation can run: its scenario
// and lock exist, its off= hook is one the replicas know, and where it
// runs another version or scenario (the fix's predecessor), that cell is
// expected to show a flaw there: a predecessor that also holds would prove
// nothing.
func TestMutationsCanRun(t *testing.T) {
	held := 0
	for _, s := range All {
		for _, m := range Mutations(s, versions.Names()) {
			held++
			name := m.Scenario + "/" + m.Lock
			if m.Missing != "" {
				if m.Fix != "" || m.Off != "" {
					t.Errorf("%s: missing (%s) but has a fix %q off=%q", name, m.Missing, m.Fix, m.Off)
				}
				// A cell with no switch says why: the plan shows it.
				if strings.HasPrefix(m.Missing, "no switch yet") {
					t.Errorf("%s has no switch and no reason: %s", name, m.Missing)
				}
				continue
			}
			i := slices.IndexFunc(All, func(r Scenario) bool { return r.Name == m.Runs })
			if i < 0 {
				t.Errorf("%s runs %s: no such scenario", name, m.Runs)
				continue
			}
			exp, ok := All[i].Expect[m.As]
			if !ok {
				t.Errorf("%s runs %s with %s: no such cell", name, m.Runs, m.As)
				continue
			}
			if m.Off != "" {
				if _, ok := chaos.ParseOff(m.Off); !ok {
					t.Errorf("%s: off=%s is no switch the replicas know (%s)", name, m.Off, chaos.OffNames)
				}
			} else if slices.Contains(Held, exp) {
				t.Errorf("%s runs %s %s, expected to hold there too (%q): it could not show the flaw", name, m.Runs, m.As, exp)
			}
			if m.Off == "" && m.As == m.Lock && m.Runs == m.Scenario {
				t.Errorf("%s: its mutation switches nothing off", name)
			}
		}
	}
	if held == 0 {
		t.Fatal("no held cell: the catalogue's outcomes and Held disagree")
	}
	// node-down's clean 503s for the single-node Redis locks claim nothing
	// of the lock's (the stock's own node is down): no row.
	for _, m := range Mutations(All[slices.IndexFunc(All, func(s Scenario) bool { return s.Name == "node-down" })], []string{"v6", "db", "redlock"}) {
		if m.Lock == "v6" {
			t.Errorf("node-down v6 has a mutation (%+v): the stock's own node is down", m)
		}
	}
	if !strings.Contains(chaos.OffNames, "claim") || !strings.Contains(chaos.OffNames, "wake") {
		t.Error("chaos.OffNames lacks claim or wake")
	}
	// Our own locks' wake-up can be lost on purpose; the libraries' cannot.
	lw := All[slices.IndexFunc(All, func(s Scenario) bool { return s.Name == "lost-wakeup" })]
	for _, m := range Mutations(lw, versions.Names()) {
		if v, _ := versions.Lookup(m.Lock); v.Wait != (m.Off == "wake") {
			t.Errorf("lost-wakeup %s: off=%q (missing %q)", m.Lock, m.Off, m.Missing)
		}
	}
}
