package main

import (
	"slices"
	"strings"
	"testing"
)

// check holds every row to its target or floor, and a miss is reported by name.
func TestCheckTargets(t *testing.T) {
	rep := &Report{
		Nginx: 10000,
		Rows: []Row{
			{Lock: "v6", Wait: "poll", P99: 240, Ratio: 0.20, RatioOf: "own"},      // above the 0.15 floor
			{Lock: "v7", Wait: "poll", P99: 300, Ratio: 0.10, RatioOf: "own"},      // below it
			{Lock: "redlock", Wait: "poll", P99: 600, Ratio: 0.30, RatioOf: "own"}, // above 0.25
			{Lock: "atomic", P99: 20, Ratio: 0.5, RatioOf: "nginx"},                // below 0.6
			{Lock: "v6", Wait: "notify", P99: 79, Ratio: 0.25, RatioOf: "own"},     // below 0.3
			// The hand-off rows' busy bound is hold / (hold + round trip): 0.80, 0.83, 0.91.
			{Lock: "v6", Wait: "handoff", P99: 40, Ratio: 0.55, RatioOf: "own", RoundTripsPerSale: 5.004, Busy: 0.82, HoldNginx: 200, RoundTrip: 50}, // all met
			{Lock: "v7", Wait: "handoff", P99: 70, Ratio: 0.39, RatioOf: "own", RoundTripsPerSale: 6.5, Busy: 0.79, HoldNginx: 300, RoundTrip: 60},   // 0.39 < 0.4, busy < 0.83, 70/300 > 1/5, 6.5 <= 7
			{Lock: "v8", Wait: "handoff", P99: 10, Ratio: 0.6, RatioOf: "own", RoundTripsPerSale: 7.5, Busy: 0.95, HoldNginx: 300, RoundTrip: 30},    // no poll row to compare; 7.5 > 7
		},
		Default:  []DefaultRun{{Lock: "v6", Wait: "poll"}, {Lock: "v8", Wait: "notify", Failed: 3}},
		MemoryMB: map[string]float64{"inventory-1": 21, "inventory-2": 55},
	}
	rep.check()
	var missed []string
	for _, m := range rep.missed() {
		missed = append(missed, strings.SplitN(m, ":", 2)[0])
	}
	want := []string{"v7 poll through nginx", "atomic through nginx", "v6 notify through nginx", "v7 handoff through nginx",
		"v7 handoff lock busy", "v7 handoff p99", "v8 handoff p99", "v8 handoff round trips", "v8 notify default load test", "inventory-2 peak RSS"}
	slices.Sort(missed)
	slices.Sort(want)
	if !slices.Equal(missed, want) {
		t.Fatalf("missed %q, want %q", missed, want)
	}
	if got := len(rep.Targets); got != 21 {
		t.Fatalf("%d targets, want 21: 8 rows, 3 lock busy, 3 p99s, 3 round trips, 2 default runs, 2 replicas", got)
	}
}

// A version's waits are measured one after the other, so that a hand-off
// row and the polling row its p99 is judged against sit in the same
// minutes; the table keeps its order by wait.
func TestMeasuresAVersionsWaitsTogether(t *testing.T) {
	rows := []Row{{Lock: "v3", Wait: "poll"}, {Lock: "v6", Wait: "poll"}, {Lock: "redlock", Wait: "poll"},
		{Lock: "v3", Wait: "notify"}, {Lock: "v6", Wait: "notify"}, {Lock: "v3", Wait: "handoff"}, {Lock: "v6", Wait: "handoff"}}
	b := &bench{rep: &Report{Rows: rows}}
	var got []string
	for _, i := range b.measureOrder() {
		got = append(got, rows[i].Lock+" "+rows[i].Wait)
	}
	want := []string{"v3 poll", "v3 notify", "v3 handoff", "v6 poll", "v6 notify", "v6 handoff", "redlock poll"}
	if !slices.Equal(got, want) {
		t.Fatalf("measured in the order %q, want %q", got, want)
	}
}
