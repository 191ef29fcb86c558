package main

import (
	"context"
	"strings"
	"testing"

	"github.com/locklab/locklab/internal/redistest"
)

// The gate's cost is measured on a real Redis: both clients sold (the
// stock went down by every sale of the slices), the figures are positive,
// and the line says them.
func TestGateCost(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	g, err := gateCost(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	left, err := rdb.Get(ctx, "bench:gate:stock").Int64()
	if err != nil {
		t.Fatal(err)
	}
	if g.PlainUs <= 0 || g.GatedUs <= 0 || g.Ratio <= 0 || g.RatioMin > g.Ratio || g.Ratio > g.RatioMax || g.RoundTripUs <= 0 || g.HookShare < 0 {
		t.Fatalf("gate cost %+v", g)
	}
	// Every timed sale sold: the stock lost one unit each, no more, no less.
	// (Not the slices' length over the median latencies: sales have a tail,
	// so their mean is longer than the median and fewer fit.)
	if sold := benchStock - left; g.Sales < 2*gateRounds+2 || sold != int64(g.Sales) {
		t.Fatalf("the stock lost %d units, the measure made %d sales: the slices did not sell what they timed", sold, g.Sales)
	}
	line := gateLine(g)
	t.Log(line)
	if !strings.Contains(line, "unarmed step gate") {
		t.Fatalf("line %q", line)
	}
	if g.Ratio > maxGateRatio {
		t.Logf("on this machine, now: %.3f x (the target is %.2f x in make bench)", g.Ratio, maxGateRatio)
	}
}

// The gate's target: met within 5%, or with rounds on both sides of 1;
// missed when every round is slower through the gate.
func TestCheckGate(t *testing.T) {
	for _, c := range []struct {
		ratio, lo, hi float64
		met           bool
	}{
		{1.03, 1.01, 1.2, true},
		{1.08, 0.97, 1.12, true},
		{1.2, 1.1, 1.3, false},
	} {
		r := &Report{Gate: &GateCost{PlainUs: 100, GatedUs: 100 * c.ratio, Ratio: c.ratio, RatioMin: c.lo, RatioMax: c.hi}}
		r.check()
		var got *Target
		for i := range r.Targets {
			if r.Targets[i].Name == "unarmed step gate" {
				got = &r.Targets[i]
			}
		}
		if got == nil || got.Met != c.met {
			t.Errorf("ratio %.2f (%.2f-%.2f): target %+v, want met %v", c.ratio, c.lo, c.hi, got, c.met)
		}
	}
}
