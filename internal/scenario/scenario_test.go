package scenario

import "testing"

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
	// Every scenario's expectations name real outcomes for versions it applies to.
	for _, s := range All {
		if len(s.Expect) == 0 || s.run == nil || s.Injected == "" {
			t.Errorf("%s is incomplete", s.Name)
		}
	}
}
