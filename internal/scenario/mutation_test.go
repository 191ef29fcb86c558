package scenario

import (
	"slices"
	"strings"
	"testing"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/reason"
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
	// Every lock's wake-up can be lost on purpose: ours by the release, the
	// libraries' by a wrapper of their client that drops it.
	lw := All[slices.IndexFunc(All, func(s Scenario) bool { return s.Name == "lost-wakeup" })]
	for _, m := range Mutations(lw, versions.Names()) {
		if m.Off != "wake" || m.Missing != "" {
			t.Errorf("lost-wakeup %s: off=%q (missing %q)", m.Lock, m.Off, m.Missing)
		}
	}
}

// A mutation whose unfixed sibling names a flaw must observe that flaw; one
// with none named, any outcome short of holding; none shows the flaw when
// it tested nothing or its history disagrees.
func TestMutationShows(t *testing.T) {
	find := func(scenario, lock string) Mutation {
		i := slices.IndexFunc(All, func(s Scenario) bool { return s.Name == scenario })
		ms := Mutations(All[i], []string{lock})
		if len(ms) != 1 {
			t.Fatalf("%s %s: %d mutations", scenario, lock, len(ms))
		}
		return ms[0]
	}
	ack := find("failover+ack", "v6")
	if ack.Flaw != TwoHolders {
		t.Fatalf("failover+ack v6 must show %q, want %q (failover's v6)", ack.Flaw, TwoHolders)
	}
	fence := find("slow-holder+fence", "v8") // runs v7: slow-holder's v7 is the flaw
	if i := slices.IndexFunc(All, func(s Scenario) bool { return s.Name == "slow-holder" }); fence.Flaw != All[i].Expect["v7"] {
		t.Fatalf("slow-holder+fence v8 must show %q, want slow-holder's v7", fence.Flaw)
	}
	if dead := find("dead-waiter-handoff", "v6"); dead.Flaw != "" {
		t.Fatalf("dead-waiter names a flaw %q; it has no unfixed sibling", dead.Flaw)
	}
	for _, tc := range []struct {
		m    Mutation
		c    Cell
		want bool
	}{
		{ack, Cell{Observed: TwoHolders}, true},
		{ack, Cell{Observed: ConfirmedLost}, false}, // a flaw, not the lock's
		{ack, Cell{Observed: NoTwoHolders}, false},
		{ack, Cell{Observed: TwoHolders, Evidence: "the history shows one holder"}, false},
		{ack, Cell{Observed: notTested(reason.New("x", "no failover"))}, false},
		{find("dead-waiter-notify", "v3"), Cell{Observed: OwnCheck}, true},
		{find("dead-waiter-notify", "v3"), Cell{Observed: MovesOn}, false},
	} {
		if got := tc.m.Shows(tc.c); got != tc.want {
			t.Errorf("%s %s observing %q (evidence %q): shows %v, want %v", tc.m.Scenario, tc.m.Lock, tc.c.Observed, tc.c.Evidence, got, tc.want)
		}
	}
}
