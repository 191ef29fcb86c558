package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/step"
)

// A sale started with ?step=ID stops before each step; /steps/{id} reads it,
// advances it and cancels it, and a cancelled sale leaves no lock behind.
func TestStepped(t *testing.T) {
	g := step.New(step.Options{})
	t.Cleanup(g.Close)
	s := newStack(t, options{lock: "v6", override: true, steps: g})
	s.rdb.Set(context.Background(), api.DefaultStockKey, 10, 0)

	r := s.do(t, "POST", "/sale?step=A&lock=v4", "")
	s.expect(t, r, 202, map[string]any{"id": "A", "state": "stopped", "phase": "acquire"})
	if next := r.body["next"].(map[string]any)["command"].(string); !strings.HasPrefix(next, "SET "+api.DefaultLockKey+" ") {
		t.Fatalf("A stopped before %q, want the lock's SET", next)
	}
	r = s.do(t, "POST", "/steps/A/next", "")
	s.expect(t, r, 200, map[string]any{"state": "stopped", "phase": "stock"})
	if done := r.body["done"].([]any); len(done) != 1 || done[0].(map[string]any)["reply"] != "OK" {
		t.Fatalf("done after one step: %v, want the SET answered OK", done)
	}
	if next := r.body["next"].(map[string]any)["command"]; next != "GET "+api.DefaultStockKey {
		t.Fatalf("A's next step is %v, want the stock's GET", next)
	}
	s.expect(t, s.do(t, "GET", "/steps/A", ""), 200, map[string]any{"state": "stopped"})
	s.expect(t, s.do(t, "POST", "/sale?step=A&lock=v4", ""), 400, map[string]any{"code": "bad_request"})
	s.expect(t, s.do(t, "POST", "/sale?step=bad%20id", ""), 400, map[string]any{"code": "bad_request"})
	s.expect(t, s.do(t, "GET", "/steps/B", ""), 404, map[string]any{"code": "not_found"})
	if s.rdb.Exists(context.Background(), api.DefaultLockKey).Val() != 1 {
		t.Fatal("A holds no lock while stopped after its SET")
	}

	r = s.do(t, "DELETE", "/steps/A", "")
	s.expect(t, r, 200, map[string]any{"state": "done"})
	if !strings.Contains(r.body["cancelled"].(string), "reset") || r.body["result"].(map[string]any)["status"] != 499.0 {
		t.Fatalf("after the reset: %v, want cancelled (reset), answered 499", r.body)
	}
	if s.rdb.Exists(context.Background(), api.DefaultLockKey).Val() != 0 || s.stock(t) != "10" {
		t.Fatalf("after the reset: lock key left, or stock %s (want 10)", s.stock(t))
	}
	s.expect(t, s.do(t, "POST", "/steps/A/next", ""), 409, map[string]any{"code": "not_stopped"})

	// To the end: the sale sells, its reply kept in its state.
	s.expect(t, s.do(t, "POST", "/sale?step=A&lock=v4", ""), 202, map[string]any{"state": "stopped"})
	r = s.do(t, "POST", "/steps/A/end", "")
	s.expect(t, r, 200, map[string]any{"state": "done"})
	if res := r.body["result"].(map[string]any); res["status"] != 200.0 || res["reply"].(map[string]any)["remaining"] != 9.0 {
		t.Fatalf("the sale's result: %v, want sold, 9 left", res)
	}
	// An unarmed sale through the same clients never stops.
	s.expect(t, s.do(t, "POST", "/sale", ""), 200, map[string]any{"sold": true, "remaining": 8.0})
}

// Beyond loopback, stepping needs the admin token: a stepped sale holds its
// lock for minutes.
func TestSteppedNeedsToken(t *testing.T) {
	g := step.New(step.Options{})
	t.Cleanup(g.Close)
	s := newStack(t, options{override: true, overrideAdmin: true, token: "t", steps: g})
	s.rdb.Set(context.Background(), api.DefaultStockKey, 10, 0)
	s.expect(t, s.do(t, "POST", "/sale?step=A", ""), 401, map[string]any{"code": "unauthorized"})
	s.expect(t, s.do(t, "POST", "/sale?step=A", "", "Authorization", "Bearer t"), 202, map[string]any{"state": "stopped"})
	s.expect(t, s.do(t, "GET", "/steps/A", ""), 401, map[string]any{"code": "unauthorized"})
	s.expect(t, s.do(t, "DELETE", "/steps/A", "", "Authorization", "Bearer t"), 200, map[string]any{"state": "done"})
}

// A stepped sale takes the lesson's lease, whatever the replica's other
// sales take, and may be fenced without -chaos (the lesson's fix); GET
// /store shows the lock key's owner and its lease running out, read live.
func TestSteppedLesson(t *testing.T) {
	g := step.New(step.Options{})
	t.Cleanup(g.Close)
	s := newStack(t, options{lock: "v6", override: true, steps: g, lessonLease: 7 * time.Second})
	ctx := context.Background()
	s.rdb.Set(ctx, api.DefaultStockKey, 10, 0)

	r := s.do(t, "POST", "/sale?step=A&lock=v4", "")
	s.expect(t, r, 202, map[string]any{"state": "stopped", "phase": "acquire"})
	if next := r.body["next"].(map[string]any)["command"].(string); !strings.HasSuffix(next, " ex 7 nx") {
		t.Fatalf("A stopped before %q, want the lesson's lease: ex 7 (go-redis sends whole seconds as EX)", next)
	}
	s.expect(t, s.do(t, "POST", "/steps/A/next", ""), 200, map[string]any{"phase": "stock"})
	r = s.do(t, "GET", "/store", "")
	s.expect(t, r, 200, map[string]any{"stock": "10", "stock_key": api.DefaultStockKey})
	lock := r.body["lock"].(map[string]any)
	if ttl := lock["pttl_ms"].(float64); lock["owner"] != s.rdb.Get(ctx, api.DefaultLockKey).Val() || ttl <= 0 || ttl > 7000 {
		t.Fatalf("the store's lock: %v, want A's owner with at most 7 s left", lock)
	}
	s.expect(t, s.do(t, "POST", "/steps/A/end", ""), 200, map[string]any{"state": "done"})
	r = s.do(t, "GET", "/store", "")
	s.expect(t, r, 200, map[string]any{"stock": "9", "lock": nil})

	// Fenced: allowed on a stepped sale without -chaos, and only there.
	s.expect(t, s.do(t, "POST", "/sale?fence=1&lock=v6", ""), 400, map[string]any{"code": "chaos_disabled"})
	r = s.do(t, "POST", "/sale?step=B&lock=v6&fence=1", "")
	s.expect(t, r, 202, map[string]any{"state": "stopped"})
	s.expect(t, s.do(t, "POST", "/steps/B/end", ""), 200, map[string]any{"state": "done"})
	r = s.do(t, "GET", "/store", "")
	if f, _ := r.body["fence"].(map[string]any); f == nil || f["token"] != "1" || r.body["counter"] != 1.0 || r.body["stock"] != "8" {
		t.Fatalf("after a fenced sale the store holds %v: want token 1 registered at the stock, stock 8", r.body)
	}
}
