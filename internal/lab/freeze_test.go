package lab_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/lab"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/procstate"
	"github.com/locklab/locklab/internal/servicetest"
)

// procFreezer freezes real processes by name, as the local cluster's
// Freeze does: here one process stands for replica r1's (the replica
// itself runs in this test's process, which cannot stop itself).
type procFreezer map[string]*procstate.Proc

func (f procFreezer) Freeze(name string, frozen bool) error {
	p, ok := f[name]
	if !ok {
		return fmt.Errorf("no process %s", name)
	}
	return p.Freeze(frozen)
}

// TestFreezeIsAlwaysThawed: a lesson's frozen replica is thawed by the
// reset (DELETE of its sale, even with no thaw asked first), by the lab's
// bound, and when the lab closes; a step call to it while frozen is 409
// (it would hang); a lab with no cluster to signal says so and refuses.
func TestFreezeIsAlwaysThawed(t *testing.T) {
	u := start(t, lab.Config{})
	if status, r := do(t, "GET", u+"/lab/api/config", "", nil); status != http.StatusOK || r["freeze"].(map[string]any)["available"] != false || r["freeze"].(map[string]any)["command"] == "" {
		t.Fatalf("config with no freezer: %d %v, want freeze not available, with the command", status, r["freeze"])
	}
	if status, r := do(t, "POST", u+"/lab/api/lesson/r1/freeze", "", nil); status != http.StatusServiceUnavailable {
		t.Fatalf("freezing with no freezer: %d %v, want 503", status, r)
	}

	p, err := procstate.Start(exec.Command("sleep", "300"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	frozen := func() bool {
		st, err := procstate.State(p.Pid())
		if err != nil {
			t.Fatal(err)
		}
		return st == 'T'
	}
	sale := servicetest.Start(t, "r1") + "/sale"
	l := lab.New(lab.Config{SaleURL: sale, Replicas: []string{"r1"}, Tick: 20 * time.Millisecond, FreezeBound: 500 * time.Millisecond,
		Freezer: func(context.Context) (lab.Freezer, error) { return procFreezer{"r1": p}, nil }})
	ts := httptest.NewServer(l.Handler())
	defer ts.Close()
	u = ts.URL
	freeze := func(why string) {
		t.Helper()
		if status, r := do(t, "POST", u+"/lab/api/lesson/r1/freeze", "", nil); status != http.StatusOK || r["frozen"] != true || !frozen() {
			t.Fatalf("freezing r1 (%s): %d %v, its process frozen: %v", why, status, r, frozen())
		}
	}

	freeze("then reset")
	if status, r := do(t, "GET", u+"/lab/api/lesson/r1/steps/x", "", nil); status != http.StatusConflict || !frozen() {
		t.Fatalf("a step read of a frozen replica: %d %v, want 409, still frozen", status, r)
	}
	if status, r := do(t, "DELETE", u+"/lab/api/lesson/r1/steps/x", "", nil); status != http.StatusNotFound || frozen() {
		t.Fatalf("the reset of a frozen replica's sale: %d %v, frozen %v: want thawed, then the replica's own answer (404: no such sale)", status, r, frozen())
	}

	freeze("then thaw")
	if status, r := do(t, "POST", u+"/lab/api/lesson/r1/thaw", "", nil); status != http.StatusOK || r["frozen"] != false || frozen() {
		t.Fatalf("thawing r1: %d %v, frozen %v", status, r, frozen())
	}

	freeze("then its bound")
	locktest.WaitFor(t, 5*time.Second, "r1 thawed at the lab's bound", func() bool { return !frozen() })

	freeze("then the lab closes")
	l.Close()
	if frozen() {
		t.Fatal("the lab closed with r1 frozen")
	}
}

// The store names the lock it reads the sales' own store for (?lock=): a
// version the lab does not know is refused; a known one is passed on.
func TestStoreOfALock(t *testing.T) {
	u := start(t, lab.Config{})
	if status, r := do(t, "GET", u+"/lab/api/lesson/store?lock=nope", "", nil); status != http.StatusBadRequest {
		t.Fatalf("the store of lock nope: %d %v, want 400", status, r)
	}
	if status, r := do(t, "GET", u+"/lab/api/lesson/store?lock=v6", "", nil); status != http.StatusOK || r["stock_key"] == nil {
		t.Fatalf("the store of lock v6: %d %v, want the replica's answer", status, r)
	}
}
