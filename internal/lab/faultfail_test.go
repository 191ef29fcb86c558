package lab_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/lab"
	"github.com/locklab/locklab/internal/servicetest"
)

// failingStack fails every fault, and records what the lab asked of it.
type failingStack struct {
	mu    sync.Mutex
	asked []string
}

func (f *failingStack) note(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, s)
}

func (f *failingStack) Freeze(name string, frozen bool) error {
	if frozen {
		f.note("freeze " + name)
		return errors.New("no such process")
	}
	f.note("thaw " + name)
	return nil
}

func (f *failingStack) Kill(name string) (func(context.Context) error, error) {
	f.note("kill " + name)
	return nil, errors.New("no such node")
}

func (f *failingStack) RedlockOnly() []string { return []string{"b"} }

// TestLessonFaultsThatFail: a freeze that fails is 503 saying why, and
// what it half did is thawed; a node stop that fails is 503 saying why;
// neither is held, so the next ask tries again.
func TestLessonFaultsThatFail(t *testing.T) {
	f := &failingStack{}
	l := lab.New(lab.Config{SaleURL: servicetest.Start(t, "r1") + "/sale", Replicas: []string{"r1"}, Tick: 20 * time.Millisecond,
		Freezer: func(context.Context) (lab.Freezer, error) { return f, nil }})
	ts := httptest.NewServer(l.Handler())
	t.Cleanup(func() { ts.Close(); l.Close() })
	for range 2 {
		if status, r := do(t, "POST", ts.URL+"/lab/api/lesson/r1/freeze", "", nil); status != http.StatusServiceUnavailable || r["code"] != "unavailable" || r["error"] != "could not freeze r1: no such process" {
			t.Errorf("a freeze that fails: %d %v", status, r)
		}
		if status, r := do(t, "POST", ts.URL+"/lab/api/lesson/nodes/b/stop", "", nil); status != http.StatusServiceUnavailable || r["code"] != "unavailable" || r["error"] != "could not stop b: no such node" {
			t.Errorf("a node stop that fails: %d %v", status, r)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	want := []string{"freeze r1", "thaw r1", "kill b", "freeze r1", "thaw r1", "kill b"}
	if len(f.asked) != len(want) {
		t.Fatalf("asked of the stack: %v, want %v", f.asked, want)
	}
	for i := range want {
		if f.asked[i] != want[i] {
			t.Fatalf("asked of the stack: %v, want %v", f.asked, want)
		}
	}
}
