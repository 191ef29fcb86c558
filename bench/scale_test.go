package main

import (
	"strings"
	"testing"
)

// The O(1) goal: a hand-off whose commands per sale grow past 1.25 x from
// c=16 to the most waiters misses it, at that number of replicas only; a
// point whose CPUs were nearly never idle is marked as the machine's limit.
func TestScaleGoal(t *testing.T) {
	s := &Scale{Date: "2026-11-26T00:00:00Z", Seconds: 1}
	add := func(n, c int, lock, wait string, cmds, idle float64) {
		s.Points = append(s.Points, ScalePoint{Replicas: n, Concurrency: c, Lock: lock, Wait: wait, CommandsPerSale: cmds, Sales: 1000, Idle: idle})
	}
	for _, n := range []int{1, 8} {
		add(n, 1, "v6", "handoff", 6, 0.5) // uncontended: not part of the goal
		add(n, 16, "v6", "handoff", 25, 0.3)
		add(n, 1, "v6", "poll", 6, 0.5)
		add(n, 16, "v6", "poll", 8, 0.3)
		add(n, 256, "v6", "poll", 20, 0.01)
	}
	add(1, 256, "v6", "handoff", 26, 0.2)  // 1.04 x: flat
	add(8, 256, "v6", "handoff", 40, 0.02) // 1.6 x: grows
	s.check()
	if len(s.Goals) != 3 || !s.Goals[0].Met || s.Goals[1].Met || !strings.Contains(s.Goals[1].Name, "replicas=8") || !s.Goals[2].Met {
		t.Fatalf("goals %+v: want 1 replica met, 8 missed, every request served", s.Goals)
	}
	// A request not served is a missed goal, and said on its point.
	s.Points[0].Failed = 3
	s.check()
	if g := s.Goals[len(s.Goals)-1]; g.Met || g.Got != "3 not served" || !strings.Contains(scaleMarkdown(s), "| 1000 (3 not served) |") {
		t.Fatalf("a point with 3 not served: goal %+v", g)
	}
	md := scaleMarkdown(s)
	for _, want := range []string{"| v6 poll | 8 | 6.0 (0.0) | 8.0 (0.0) | 20.0 (0.0)* |", "v6 poll, replicas=1: 8.0 -> 20.0 commands per sale from c=16 to c=256 (2.50 x)", "✗"} {
		if !strings.Contains(md, want) {
			t.Errorf("the docs' section lacks %q:\n%s", want, md)
		}
	}
	if svg := scaleSVG(s); !strings.Contains(svg, "v6 handoff: commands / sale") || strings.Count(svg, "<polyline") != 2*len(scaleRows)*2 {
		t.Errorf("the chart: %d lines, want a line per replicas per panel (%d)", strings.Count(svg, "<polyline"), 2*len(scaleRows)*2)
	}
}

func TestScaleFlags(t *testing.T) {
	var stderr strings.Builder
	o, err := parseScale([]string{"-replicas", "1,3", "-c", "2,8"}, &stderr)
	if err != nil || len(o.replicas) != 2 || o.conc[1] != 8 {
		t.Fatalf("%+v %v", o, err)
	}
	for _, bad := range [][]string{{"-replicas", "0"}, {"-c", "8,2"}, {"-c", "x"}, {"-duration", "0s"}} {
		if _, err := parseScale(bad, &stderr); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	cpu, err := readCPU()
	if err != nil || cpu.total <= 0 || cpu.idle > cpu.total {
		t.Fatalf("/proc/stat: %+v %v", cpu, err)
	}
}
