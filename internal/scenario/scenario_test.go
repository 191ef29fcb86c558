package scenario

import (
	"slices"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/locklab/locklab/internal/versions"
)

func TestMatrix(t *testing.T) {
	cells := []Cell{
		{Scenario: "reentry", Lock: "v7", Expected: Passes, Observed: Passes},
		{Scenario: "slow-holder", Lock: "v4", Expected: ForeignDelete, Observed: NoOversell},
	}
	rows := Matrix(cells, []string{"none", "v4", "v7"})
	if len(rows) != 2 || rows[0].Lock != "v4" || rows[1].Lock != "v7" {
		t.Fatalf("rows %+v: want v4 then v7 (none has no cell)", rows)
	}
	for i, s := range All {
		c := rows[0].Cells[i]
		if (s.Name == "slow-holder") != (c != nil) {
			t.Fatalf("v4's %s cell = %v", s.Name, c)
		}
		if c != nil && c.OK() {
			t.Fatal("a cell whose observation differs reports OK")
		}
	}
}

// The catalogue (scenarios.json) expects only outcomes the code can observe,
// of versions that exist: a typo there would fail every run of its cell.
func TestCatalogue(t *testing.T) {
	outcomes := []string{Oversell, NoOversell, ForeignDelete, NoForeignDelete, DeletesSuccessor, KeepsSuccessor,
		WaitsOnItself, Passes, StaleRefused, Deadlock, Clean503, KeepsSelling, Resumes, ResumesAtOnce, WaitsForHolder, StopsBeforeWrite, TwoHolders, NoTwoHolders, ConfirmedLost, NoConfirmedLost, MovesOn, OwnCheck, AllWoken, Stranded, StrandsCleanly}
	for _, s := range All {
		if len(s.Expect) == 0 || s.run == nil || s.Injected == "" {
			t.Errorf("%s is incomplete", s.Name)
		}
		for lock, want := range s.Expect {
			if _, ok := versions.Lookup(lock); !ok {
				t.Errorf("%s expects something of %q, which is no version", s.Name, lock)
			}
			if !slices.Contains(outcomes, want) {
				t.Errorf("%s expects %q of %s, which no scenario observes", s.Name, want, lock)
			}
		}
	}
}

// lost-wakeup expects a stranded waiter's clean 503 exactly of the versions
// whose catalogue entry says they lose wake-ups, and no stranding of the
// others: the e2e load runs forgive a 503 by the same field.
func TestLostWakeupAgreesWithCatalogue(t *testing.T) {
	for _, s := range All {
		if s.Name != "lost-wakeup" {
			continue
		}
		for lock, want := range s.Expect {
			v, _ := versions.Lookup(lock)
			if (want == StrandsCleanly) != (v.LostWakeup != "") {
				t.Errorf("lost-wakeup expects %q of %s, whose catalogue says lost_wakeup %q", want, lock, v.LostWakeup)
			}
		}
		return
	}
	t.Fatal("no lost-wakeup scenario")
}

// Every version's lesson (the lab's button that reproduces its flaw) names
// a scenario with a cell for that version, its fix one too, and a run only
// versions that exist.
func TestLessonsNameRealCells(t *testing.T) {
	cells := map[string]map[string]string{}
	for _, s := range All {
		cells[s.Name] = s.Expect
	}
	for _, v := range versions.All {
		l := v.Lesson
		switch {
		case l.Scenario == "" && len(l.Run) == 0:
			t.Errorf("%s: a lesson with neither a scenario nor a run", v.Name)
		case l.Scenario != "" && cells[l.Scenario][v.Name] == "":
			t.Errorf("%s: lesson scenario %q has no cell for it", v.Name, l.Scenario)
		case l.Fix != "" && cells[l.Fix][v.Name] == "":
			t.Errorf("%s: lesson fix %q has no cell for it", v.Name, l.Fix)
		}
		for _, name := range l.Run {
			if !slices.Contains(versions.Names(), name) {
				t.Errorf("%s: lesson runs %q, no such version", v.Name, name)
			}
		}
	}
}

// make scenarios picks the pass a scenario runs in by its name (a name with
// "sentinel" in it runs in the second pass, on the cluster Sentinel
// watches): the catalogue's needs_sentinel must agree, and every scenario
// fits exactly one of the two passes' clusters.
func TestSentinelPassAgreesWithCatalogue(t *testing.T) {
	// Each pass's own lease and acquire deadline (make scenarios' settings).
	plain := Env{Faults: &toxiproxy.Client{}, TTL: time.Second, AcquireTimeout: 5 * time.Second}
	sentinel := Env{Faults: &toxiproxy.Client{}, Sentinels: []string{"127.0.0.1:26380"}, TTL: 15 * time.Second, AcquireTimeout: 5 * time.Second}
	for _, s := range All {
		if s.NeedsSentinel != strings.Contains(s.Name, "sentinel") {
			t.Errorf("%s: needs_sentinel %v, but make scenarios picks its pass by the name", s.Name, s.NeedsSentinel)
		}
		if (s.Unfit(plain) == "") == (s.Unfit(sentinel) == "") {
			t.Errorf("%s fits %q on the first pass's cluster and %q on the second's: want exactly one", s.Name, s.Unfit(plain), s.Unfit(sentinel))
		}
	}
}
