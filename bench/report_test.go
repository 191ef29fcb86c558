package main

import (
	"slices"
	"strings"
	"testing"
)

// check holds every version to its own target, and a miss is reported by name.
func TestCheckTargets(t *testing.T) {
	rep := &Report{
		Nginx: 10000,
		Rows: []Row{
			{Lock: "v6", Wait: "poll", Own: 2000, Sales: 1700, P99: 240, Ratio: 0.85},
			{Lock: "v7", Wait: "poll", Own: 2000, Sales: 1500, P99: 300, Ratio: 0.75},      // below 0.8
			{Lock: "redlock", Wait: "poll", Own: 2000, Sales: 1300, P99: 600, Ratio: 0.65}, // above 0.6
			{Lock: "atomic", Sales: 5000, P99: 20, Ratio: 0.5, RatioOf: "nginx"},           // below 0.6
			{Lock: "v6", Wait: "notify", Own: 1500, Sales: 1400, P99: 79, Ratio: 0.93},     // 79/240 < 1/3
			{Lock: "v7", Wait: "notify", Own: 1500, Sales: 1400, P99: 150, Ratio: 0.93},    // 150/300 > 1/3
		},
		Default:  []DefaultRun{{Lock: "v6", Wait: "poll"}, {Lock: "v8", Wait: "notify", Failed: 3}},
		MemoryMB: map[string]float64{"inventory-1": 21, "inventory-2": 55},
	}
	rep.check()
	var missed []string
	for _, m := range rep.missed() {
		missed = append(missed, strings.SplitN(m, ":", 2)[0])
	}
	want := []string{"v7 poll through nginx", "atomic through nginx", "v7 notify p99", "v8 notify default load test", "inventory-2 peak RSS"}
	slices.Sort(missed)
	slices.Sort(want)
	if !slices.Equal(missed, want) {
		t.Fatalf("missed %q, want %q", missed, want)
	}
	if got := len(rep.Targets); got != 12 {
		t.Fatalf("%d targets, want 12: 6 rows, 2 p99s, 2 default runs, 2 replicas", got)
	}
}
