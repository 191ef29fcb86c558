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
		StockNode: "redis-6381", SpareNodes: []string{"redis-6382", "redis-6383"},
		EtcdMembers: []Member{{Name: "etcd-1"}, {Name: "etcd-2"}, {Name: "etcd-3"}},
		ZKMembers:   []Member{{Name: "zk-1"}, {Name: "zk-2"}, {Name: "zk-3"}}, DBNode: "mariadb"}
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

// targets are the processes a schedule's faults hit.
func targets(faults []Fault) map[string]bool {
	hit := map[string]bool{}
	for _, f := range faults {
		if f.Kind != FaultSlowHolder {
			from, to, _ := strings.Cut(f.Target, ">")
			hit[from], hit[to] = true, to != ""
		}
	}
	delete(hit, "")
	return hit
}

// Finding 6: the nemesis faults what the locks use. With no locks named,
// etcd's members, ZooKeeper's and MariaDB are faulted too (they never were);
// with locks named, only what those locks' sales use: v6 and etcd reach
// the replicas, the stock's node and etcd's members, never redlock's spare
// nodes, ZooKeeper or MariaDB.
func TestScheduleFaultsWhatTheLocksUse(t *testing.T) {
	e := nemesisEnv(true)
	all := targets(e.Schedule(12, 10*time.Minute))
	for _, p := range []string{"etcd-1", "etcd-2", "etcd-3", "zk-1", "zk-2", "zk-3", "mariadb"} {
		if !all[p] {
			t.Errorf("ten minutes of every lock's faults never hit %s: %v", p, all)
		}
	}
	uses := append(e.Uses("v6"), e.Uses("etcd")...)
	some := e.Schedule(12, 10*time.Minute, "v6", "etcd")
	for p := range targets(some) {
		if !slices.Contains(uses, p) {
			t.Errorf("v6 and etcd: a fault hit %s, which neither uses", p)
		}
	}
	if n := Touching(some, []string{"etcd-1", "etcd-2", "etcd-3"}); n == 0 {
		t.Errorf("v6 and etcd: no fault hit etcd: %v", targets(some))
	}
	for _, f := range some {
		if f.Kind == FaultKill && f.Target == e.StockNode {
			t.Fatalf("fault %v kills the stock's node", f)
		}
	}
	if got := e.Uses("zk"); !slices.Contains(got, "zk-2") || slices.Contains(got, "etcd-1") || !slices.Contains(e.Uses("db"), "mariadb") ||
		!slices.Contains(e.Uses("redlock"), "redis-6383") || slices.Contains(e.Uses("v8"), "redis-6383") {
		t.Fatalf("uses: zk %v, db %v, redlock %v, v8 %v", got, e.Uses("db"), e.Uses("redlock"), e.Uses("v8"))
	}
}

// A fault touches the processes it hit: either end of a partition; a slow
// holder touches every run (it is one of its sales); a replica's kill is
// the run's lost history.
func TestTouching(t *testing.T) {
	faults := []Fault{
		{Kind: FaultPause, Target: "redis-6383"},
		{Kind: FaultPartition, Target: "inventory-1>redis-6383"},
		{Kind: FaultSlowHolder, Target: SlowHolderTarget},
		{Kind: FaultKill, Target: "inventory-2"},
	}
	if n := Touching(faults, []string{"redis-6383"}); n != 3 {
		t.Fatalf("redis-6383: %d faults, want the pause, the partition and the slow holder", n)
	}
	if n := Touching(faults, []string{"etcd-1"}); n != 1 {
		t.Fatalf("etcd-1: %d faults, want the slow holder only", n)
	}
	if k := KilledReplicas(faults, []string{"inventory-1", "inventory-2"}); len(k) != 1 || k[0].Target != "inventory-2" {
		t.Fatalf("killed replicas %v", k)
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
