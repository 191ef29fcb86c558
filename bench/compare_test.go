package main

import (
	"strings"
	"testing"
)

// The goal's three lines: a library faster or steadier than our hand-off
// is a missed target, by name, and said in the docs' table.
func TestCheckComparison(t *testing.T) {
	sides := func(ourSales, ourP99 float64, ourFailed int) *Comparison {
		return &Comparison{Rounds: 3, Seconds: 3, Sides: []Side{
			{Lock: "v6", Wait: "poll", Sales: 900, P99: 200},
			{Lock: "v6", Wait: "handoff", Sales: ourSales, P99: ourP99, Failed: ourFailed},
			{Lock: "redislock", Wait: "poll", Library: "github.com/bsm/redislock", Sales: 1000, P99: 150, Trips: true},
			{Lock: "rueidislock-1", Wait: "invalidation", Library: "github.com/redis/rueidis/rueidislock", Sales: 3600, P99: 100},
		}}
	}
	for _, tc := range []struct {
		name      string
		compare   *Comparison
		missed    []string
		beatenBy  int
		wantLines int
	}{
		{"all met", sides(3700, 40, 0), nil, 0, 3},
		{"a library sells faster", sides(3100, 40, 0), []string{compareTitle + ": sales/s"}, 1, 3},
		{"p99 over half the lowest", sides(3700, 60, 0), []string{compareTitle + ": p99"}, 0, 3},
		{"a waiter stuck, and a library steadier", sides(3700, 120, 1), []string{compareTitle + ": p99", compareTitle + ": no waiter stuck"}, 1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{Compare: tc.compare}
			var lines int
			var missed []string
			r.checkComparison(func(name, want, got string, met bool) {
				lines++
				if !met {
					missed = append(missed, name)
				}
			})
			if lines != tc.wantLines || strings.Join(missed, "|") != strings.Join(tc.missed, "|") {
				t.Fatalf("%d lines, missed %q; want %d, %q", lines, missed, tc.wantLines, tc.missed)
			}
			if r.Compare.Fastest != "rueidislock-1 invalidation" || r.Compare.Steadiest != "rueidislock-1 invalidation" {
				t.Fatalf("fastest %q, steadiest %q", r.Compare.Fastest, r.Compare.Steadiest)
			}
			if got := len(r.Compare.beaten()); got != tc.beatenBy {
				t.Fatalf("beaten by %d, want %d: %q", got, tc.beatenBy, r.Compare.beaten())
			}
		})
	}
	// A library that tested too little (every request failed fast: no
	// sales, a tiny p99) is no baseline and beats nobody, and the
	// comparison's own line fails on it: no pass without evidence.
	c := sides(3700, 40, 0)
	c.Sides = append(c.Sides, Side{Lock: "redislock", Wait: "handoff", Library: "github.com/bsm/redislock", Sales: 0, P99: 1, Failed: 500, TooLittle: "round 1 sold nothing"})
	r0 := &Report{Compare: c}
	var missed []string
	r0.checkComparison(func(name, _, _ string, met bool) {
		if !met {
			missed = append(missed, name)
		}
	})
	if strings.Join(missed, "|") != compareTitle+": every side tested" || c.Steadiest != "rueidislock-1 invalidation" || len(c.beaten()) != 0 {
		t.Fatalf("missed %q, steadiest %q, beaten by %q; want only the untested line missed", missed, c.Steadiest, c.beaten())
	}
	// With no library measured (a partial bench), no goal line.
	r := &Report{Compare: &Comparison{Sides: []Side{{Lock: "v6", Wait: "handoff", Sales: 1}}}}
	r.checkComparison(func(name, _, _ string, _ bool) { t.Fatalf("goal line %q with no library", name) })
}

// The docs' section says each goal line once, under the comparison's table,
// and where a library beat us.
func TestComparisonMarkdown(t *testing.T) {
	r := &Report{Date: "2026-11-26T00:00:00Z", Concurrency: 64, Compare: &Comparison{Rounds: 3, Seconds: 3, Sides: []Side{
		{Lock: "v6", Wait: "handoff", Sales: 2677, P99: 36, Trips: true},
		{Lock: "rueidislock-1", Wait: "invalidation", Library: "github.com/redis/rueidis/rueidislock", Sales: 3334, P99: 128},
	}}}
	r.check()
	md := markdown(r)
	for _, want := range []string{"| `rueidislock-1` | invalidation | `github.com/redis/rueidis/rueidislock` | 3334 |", "not counted (its own client)",
		"rueidislock-1 invalidation sold 3334/s to our hand-off's 2677 (1.25 x)"} {
		if !strings.Contains(md, want) {
			t.Errorf("the docs' section lacks %q:\n%s", want, md)
		}
	}
	for _, line := range []string{compareTitle + ": sales/s", compareTitle + ": p99", compareTitle + ": no waiter stuck"} {
		if n := strings.Count(md, line); n != 1 {
			t.Errorf("%q said %d times, want once", line, n)
		}
	}
}
