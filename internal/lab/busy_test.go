package lab_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/lab"
	"github.com/locklab/locklab/internal/procstate"
	"github.com/locklab/locklab/internal/redistest"
)

// freezeKiller freezes the real processes and kills the real redis-servers
// the lesson names: both faults at once, for a lab a run keeps busy.
type freezeKiller struct {
	procFreezer
	redisKiller
}

func (f freezeKiller) Freeze(name string, frozen bool) error {
	return f.procFreezer.Freeze(name, frozen)
}

// TestLessonFaultsRefusedWhileBusy: while a run uses the stack, a lesson's
// freeze and its node stop are refused (409 busy) and fault nothing.
func TestLessonFaultsRefusedWhileBusy(t *testing.T) {
	p, err := procstate.Start(exec.Command("sleep", "300"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	k := redisKiller{"b": redistest.Start(t)}
	// The replica answers nothing until the test ends: the run stays busy.
	release := make(chan struct{})
	replica := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		http.Error(w, "gone", http.StatusServiceUnavailable)
	}))
	t.Cleanup(replica.Close)
	l := lab.New(lab.Config{SaleURL: replica.URL + "/sale", Replicas: []string{"r1"}, Tick: 20 * time.Millisecond,
		Freezer: func(context.Context) (lab.Freezer, error) { return freezeKiller{procFreezer{"r1": p}, k}, nil }})
	ts := httptest.NewServer(l.Handler())
	t.Cleanup(func() { ts.Close(); l.Close() })
	t.Cleanup(func() { close(release) }) // first: the run ends
	u := ts.URL
	if status, r := do(t, "POST", u+"/lab/api/runs", `{"locks":["v6"],"requests":10,"concurrency":1,"stock":5}`, nil); status/100 != 2 {
		t.Fatalf("starting a run: %d %v", status, r)
	}
	for _, f := range []struct{ path, what string }{{"/lab/api/lesson/r1/freeze", "freezes a replica"}, {"/lab/api/lesson/nodes/b/stop", "stops a Redis node"}} {
		status, r := do(t, "POST", u+f.path, "", nil)
		if msg, _ := r["error"].(string); status != http.StatusConflict || r["code"] != "busy" || !strings.Contains(msg, "a lesson "+f.what) {
			t.Errorf("POST %s during a run: %d %v, want 409 busy", f.path, status, r)
		}
	}
	if st, err := procstate.State(p.Pid()); err != nil || st == 'T' {
		t.Errorf("r1's process during a run: state %q, err %v: frozen by a refused lesson", st, err)
	}
	if err := k["b"].Client().Ping(context.Background()).Err(); err != nil {
		t.Errorf("node b during a run: %v: stopped by a refused lesson", err)
	}
}
