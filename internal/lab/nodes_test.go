package lab_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/lab"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/internal/servicetest"
)

// redisKiller kills real redis-servers by name and starts them again,
// empty, as the local cluster's Kill does (no persistence): "stock" stands
// for the stock's node, which a lesson may not stop.
type redisKiller map[string]*redistest.Server

func (k redisKiller) Freeze(string, bool) error { return fmt.Errorf("not here") }

func (k redisKiller) Kill(name string) (func(context.Context) error, error) {
	s, ok := k[name]
	if !ok {
		return nil, fmt.Errorf("no node %s", name)
	}
	s.Stop()
	return func(context.Context) error { s.Restart(); return nil }, nil
}

func (k redisKiller) RedlockOnly() []string { return []string{"b", "c"} }

// TestNodesAreAlwaysStarted: a Redis node a lesson stopped is started
// again by the reset (DELETE of a sale, even with no start asked first),
// by the page's start, by the lab's bound, and when the lab closes; a
// restart kills it and starts it at once, and it comes back empty; the
// stock's node is never stopped; a run is refused while a lesson holds a
// node stopped; a lab with no cluster to signal says so and refuses.
func TestNodesAreAlwaysStarted(t *testing.T) {
	u := start(t, lab.Config{})
	if status, r := do(t, "GET", u+"/lab/api/config", "", nil); status != http.StatusOK || r["nodes"].(map[string]any)["available"] != false || r["nodes"].(map[string]any)["command"] != "make up" {
		t.Fatalf("config with no cluster: %d %v, want nodes not available, with the command", status, r["nodes"])
	}
	if status, r := do(t, "POST", u+"/lab/api/lesson/nodes/b/stop", "", nil); status != http.StatusServiceUnavailable {
		t.Fatalf("stopping a node with no cluster: %d %v, want 503", status, r)
	}

	k := redisKiller{"stock": redistest.Start(t), "b": redistest.Start(t), "c": redistest.Start(t)}
	up := func(name string) bool {
		return k[name].Client().Ping(context.Background()).Err() == nil
	}
	sale := servicetest.Start(t, "r1") + "/sale"
	l := lab.New(lab.Config{SaleURL: sale, Replicas: []string{"r1"}, Tick: 20 * time.Millisecond, NodeBound: 500 * time.Millisecond,
		Freezer: func(context.Context) (lab.Freezer, error) { return k, nil }})
	ts := httptest.NewServer(l.Handler())
	defer ts.Close()
	u = ts.URL
	if status, r := do(t, "GET", u+"/lab/api/config", "", nil); status != http.StatusOK || r["nodes"].(map[string]any)["available"] != true {
		t.Fatalf("config with a cluster: %d %v, want nodes available", status, r["nodes"])
	}
	stop := func(name, why string) {
		t.Helper()
		if status, r := do(t, "POST", u+"/lab/api/lesson/nodes/"+name+"/stop", "", nil); status != http.StatusOK || r["down"] != true || up(name) {
			t.Fatalf("stopping %s (%s): %d %v, it still answers: %v", name, why, status, r, up(name))
		}
	}
	if status, r := do(t, "POST", u+"/lab/api/lesson/nodes/stock/stop", "", nil); status != http.StatusNotFound || !up("stock") {
		t.Fatalf("stopping the stock's node: %d %v, want 404, left up", status, r)
	}

	stop("b", "then reset")
	stop("c", "then reset")
	if status, r := do(t, "POST", u+"/lab/api/runs", `{"locks":["v6"],"requests":10,"concurrency":1,"stock":5}`, nil); status != http.StatusConflict || r["code"] != "busy" {
		t.Fatalf("a run while a lesson holds nodes stopped: %d %v, want 409 busy", status, r)
	}
	if status, r := do(t, "DELETE", u+"/lab/api/lesson/r1/steps/x", "", nil); status != http.StatusNotFound || !up("b") || !up("c") {
		t.Fatalf("the reset with nodes stopped: %d %v, b up %v, c up %v: want both started, then the replica's own answer (404: no such sale)", status, r, up("b"), up("c"))
	}

	stop("b", "then start")
	if status, r := do(t, "POST", u+"/lab/api/lesson/nodes/b/start", "", nil); status != http.StatusOK || r["down"] != false || !up("b") {
		t.Fatalf("starting b: %d %v, up %v", status, r, up("b"))
	}

	if err := k["b"].Client().Set(context.Background(), "lock", "A", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if status, r := do(t, "POST", u+"/lab/api/lesson/nodes/b/restart", "", nil); status != http.StatusOK || r["down"] != false || !up("b") {
		t.Fatalf("restarting b: %d %v, up %v", status, r, up("b"))
	}
	if n := k["b"].Client().Exists(context.Background(), "lock").Val(); n != 0 {
		t.Fatal("b restarted with its key: want it empty, as a node with no persistence")
	}

	stop("c", "then its bound")
	locktest.WaitFor(t, 5*time.Second, "c started again at the lab's bound", func() bool { return up("c") })

	stop("c", "then the lab closes")
	l.Close()
	if !up("c") {
		t.Fatal("the lab closed with c stopped")
	}
}
