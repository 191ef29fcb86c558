package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	lua "github.com/locklab/locklab/internal/locks/v6_lua"
	"github.com/locklab/locklab/internal/server"
)

// hold takes v6's lock as another replica would, until the test ends.
func (s *stack) hold(t *testing.T) {
	t.Helper()
	held, err := lua.New(s.rdb, lua.Options{Key: api.DefaultLockKey}).TryAcquire(context.Background(), "another replica")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = held.Release(context.Background()) })
}

// setCalls is how many SET commands the stock's node has run: a waiter's
// every attempt at v6's lock is one, so it shows that a sale is waiting.
func (s *stack) setCalls(t *testing.T) int {
	t.Helper()
	info, err := s.rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(info, "cmdstat_set:calls=")
	n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
	return n
}

// waitFor polls cond (observable state) for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// One sale beyond -max-in-flight is answered at once: 503 busy, Retry-After.
func TestInFlightCap(t *testing.T) {
	s := newStack(t, options{lock: "v6", maxInFlight: 1, token: "t", chaos: true})
	s.rdb.Set(context.Background(), api.DefaultStockKey, 5, 0)
	holder := make(chan reply, 1)
	go func() { holder <- s.do(t, "POST", "/sale?hold=1s", "", "Authorization", "Bearer t") }()
	waitFor(t, "the first sale holds the lock", func() bool { return s.rdb.Exists(context.Background(), api.DefaultLockKey).Val() == 1 })
	r := s.do(t, "POST", "/sale", "")
	s.expect(t, r, http.StatusServiceUnavailable, map[string]any{"code": api.CodeBusy})
	if r.header.Get("Retry-After") == "" {
		t.Fatal("busy reply without Retry-After")
	}
	s.expect(t, s.do(t, "GET", "/stock", ""), http.StatusOK, nil) // only sales are capped
	s.expect(t, <-holder, http.StatusOK, map[string]any{"sold": true})
	s.expect(t, s.do(t, "POST", "/sale", ""), http.StatusOK, map[string]any{"sold": true}) // the slot is free again
}

// The requests other than sales have their own cap: one beyond it is
// answered 503 busy at once, and sales go on meanwhile.
func TestOthersInFlightCap(t *testing.T) {
	inside, release := make(chan struct{}, 1), make(chan struct{})
	ready := func(context.Context) error {
		inside <- struct{}{}
		<-release
		return nil
	}
	s := newStack(t, options{lock: "v6", maxOthers: 1, token: "t", ready: ready})
	s.rdb.Set(context.Background(), api.DefaultStockKey, 5, 0)
	probe := make(chan reply, 1)
	go func() { probe <- s.do(t, "GET", "/readyz", "") }()
	<-inside // the probe holds the one slot
	for _, r := range []struct{ method, path string }{{"GET", "/stock"}, {"GET", "/history"}, {"PUT", "/stock"}, {"GET", "/readyz"}} {
		got := s.do(t, r.method, r.path, `{"stock":9}`, "Authorization", "Bearer t")
		s.expect(t, got, http.StatusServiceUnavailable, map[string]any{"code": api.CodeBusy})
		if got.header.Get("Retry-After") == "" {
			t.Fatalf("%s %s: busy reply without Retry-After", r.method, r.path)
		}
	}
	s.expect(t, s.do(t, "POST", "/sale", ""), http.StatusOK, map[string]any{"sold": true}) // sales have their own
	s.expect(t, s.do(t, "GET", "/healthz", ""), http.StatusOK, nil)
	close(release)
	s.expect(t, <-probe, http.StatusOK, nil)
	s.expect(t, s.do(t, "GET", "/stock", ""), http.StatusOK, map[string]any{"stock": float64(4)})
}

// When the replica stops, a sale waiting for the lock gives up at once with
// 503 shutting_down, and sold nothing.
func TestShutdownCancelsWaiters(t *testing.T) {
	base, stop := context.WithCancelCause(context.Background())
	s := newStack(t, options{lock: "v6", acquireTimeout: 30 * time.Second, base: base})
	s.rdb.Set(context.Background(), api.DefaultStockKey, 5, 0)
	s.hold(t)
	before := s.setCalls(t)
	done := make(chan reply, 1)
	go func() { done <- s.do(t, "POST", "/sale", "") }()
	waitFor(t, "the sale is waiting for the lock", func() bool { return s.setCalls(t) >= before+2 })
	start := time.Now()
	stop(server.ErrShuttingDown)
	r := <-done
	s.expect(t, r, http.StatusServiceUnavailable, map[string]any{"code": api.CodeShuttingDown})
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the waiter took %s to give up", took)
	}
	if s.stock(t) != "5" {
		t.Fatalf("stock %s, want 5", s.stock(t))
	}
}

// A request id is kept when it is a plain token and replaced otherwise.
func TestRequestID(t *testing.T) {
	s := newStack(t, options{})
	for id, kept := range map[string]bool{"cell-1:2.3_x": true, "has space": false, "": false, "a\r\nb": false,
		strings.Repeat("a", 128): true, strings.Repeat("a", 129): false} {
		req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
		req.Header["X-Request-Id"] = []string{id}
		_, header, _ := s.serve(t, req)
		if got := header.Get("X-Request-Id"); kept != (got == id) || got == "" {
			t.Errorf("X-Request-Id %q came back as %q, want kept %t", id, got, kept)
		}
	}
}
