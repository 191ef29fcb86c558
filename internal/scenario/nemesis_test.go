package scenario

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

func nemesisEnv(faults bool) Env {
	e := Env{TTL: time.Second, Replicas: [2]Replica{{Name: "inventory-1"}, {Name: "inventory-2"}},
		StockNode: "redis-6381", SpareNodes: []string{"redis-6382", "redis-6383"}}
	if faults {
		e.Faults = toxiproxy.NewClient("127.0.0.1:1") // never called: Schedule only asks whether there is one
	}
	return e
}

// The same seed gives the same schedule, another seed another; every fault
// ends a lease before the run does, one at a time; the stock's node is never
// killed (it would come back without the stock); without the fault proxies
// there is no network or clock fault.
func TestSchedule(t *testing.T) {
	e := nemesisEnv(true)
	a, b := e.Schedule(1, time.Minute), e.Schedule(1, time.Minute)
	if len(a) < 10 || !reflect.DeepEqual(a, b) {
		t.Fatalf("seed 1 twice: %d and %d faults, equal %v; want the same schedule of at least 10", len(a), len(b), reflect.DeepEqual(a, b))
	}
	if reflect.DeepEqual(a, e.Schedule(2, time.Minute)) {
		t.Fatal("seeds 1 and 2 gave the same schedule")
	}
	kinds := map[string]bool{}
	for i, f := range a {
		kinds[f.Kind] = true
		if f.At < e.TTL || f.At+f.For+e.TTL > time.Minute {
			t.Fatalf("fault %v outside [a lease, the run less a lease]", f)
		}
		if i > 0 && f.At < a[i-1].At+a[i-1].For {
			t.Fatalf("fault %v starts before %v is healed", f, a[i-1])
		}
		if f.Kind == FaultKill && f.Target == e.StockNode {
			t.Fatalf("fault %v kills the stock's node", f)
		}
	}
	if len(kinds) < 5 {
		t.Fatalf("a minute of faults used only %v", kinds)
	}
	for _, f := range nemesisEnv(false).Schedule(3, 5*time.Minute) {
		if slices.Contains([]string{FaultPartition, FaultDelay, FaultClockJump}, f.Kind) {
			t.Fatalf("without fault proxies: %v", f)
		}
	}
}

// A slow holder is the load's request due at the fault's time.
func TestSlowSales(t *testing.T) {
	faults := []Fault{{At: 2 * time.Second, Kind: FaultSlowHolder, For: 1500 * time.Millisecond}, {At: 3 * time.Second, Kind: FaultPause}}
	got := SlowSales(faults, 30)
	if len(got) != 1 || got[61] != 1500*time.Millisecond {
		t.Fatalf("slow sales %v, want request 61 (due at 2 s at 30/s) holding 1.5s", got)
	}
	if s := faults[0].String(); !strings.Contains(s, "slow-holder") || !strings.Contains(s, "1.5s") {
		t.Fatalf("fault prints %q", s)
	}
}
