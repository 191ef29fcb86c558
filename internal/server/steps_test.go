package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/locktest"
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

// A stepped sale that crashes holding v3's lock sends nothing more, not
// even its release: its key stays, with no expiry, and the next sale waits
// until its bound and answers lock_timeout. The reset removes the crashed
// sale's lock only while it still holds its owner (a string's value, a
// hash's field), never another's; a crash is refused where a reset could
// not remove what it leaves.
func TestSteppedCrash(t *testing.T) {
	g := step.New(step.Options{Wait: 300 * time.Millisecond})
	t.Cleanup(g.Close)
	s := newStack(t, options{lock: "v6", override: true, steps: g, lessonLease: 10 * time.Second})
	ctx := context.Background()
	s.rdb.Set(ctx, api.DefaultStockKey, 10, 0)
	lockKey := api.DefaultLockKey

	// holding starts a stepped sale of lock and lets it take its lock (a
	// script's NOSCRIPT answered by its EVAL is one more step).
	holding := func(id, lock string) {
		t.Helper()
		s.expect(t, s.do(t, "POST", "/sale?step="+id+"&lock="+lock, ""), 202, map[string]any{"phase": "acquire"})
		for r := s.do(t, "POST", "/steps/"+id+"/next", ""); r.body["phase"] == "acquire"; r = s.do(t, "POST", "/steps/"+id+"/next", "") {
		}
		if s.rdb.Exists(ctx, lockKey).Val() != 1 {
			t.Fatalf("%s holds no %s lock after its acquire", id, lock)
		}
	}
	holding("A", "v3")
	owner := s.rdb.Get(ctx, lockKey).Val()
	r := s.do(t, "POST", "/steps/A/crash", "")
	s.expect(t, r, 200, map[string]any{"state": "done", "crashed": true, "left": true})
	if got, ttl := s.rdb.Get(ctx, lockKey).Val(), s.rdb.PTTL(ctx, lockKey).Val(); got != owner || ttl != -1 || s.stock(t) != "10" {
		t.Fatalf("after A's crash the lock key holds %q (A's: %q) with PTTL %v, stock %s: want A's lock left, no expiry, stock 10", got, owner, ttl, s.stock(t))
	}
	for _, d := range r.body["done"].([]any) {
		if d.(map[string]any)["phase"] == "release" {
			t.Fatalf("a crashed sale released: %v", d)
		}
	}
	s.expect(t, s.do(t, "POST", "/steps/A/crash", ""), 409, map[string]any{"code": "not_stopped"})

	// B runs to its end: it asks until its bound of running time, and gives up.
	s.expect(t, s.do(t, "POST", "/sale?step=B&lock=v3", ""), 202, map[string]any{"state": "stopped"})
	r = s.do(t, "POST", "/steps/B/end", "")
	s.expect(t, r, 200, map[string]any{"state": "done"})
	res := r.body["result"].(map[string]any)
	if res["status"] != 503.0 || res["reply"].(map[string]any)["code"] != "lock_timeout" {
		t.Fatalf("B's result: %v, want 503 lock_timeout", res)
	}
	done := r.body["done"].([]any)
	first, last := done[0].(map[string]any), done[len(done)-1].(map[string]any)
	start, _ := time.Parse(time.RFC3339Nano, first["start"].(string))
	end, _ := time.Parse(time.RFC3339Nano, last["end"].(string))
	if len(done) < 2 || end.Sub(start) < 250*time.Millisecond || first["reply"] != "(nil)" || last["reply"] != "(nil)" {
		t.Fatalf("B asked %d times over %s, first %v last %v: want SET NX answered nil until its 300 ms bound", len(done), end.Sub(start), first, last)
	}

	// Another's lock now: the reset leaves it.
	s.rdb.Set(ctx, lockKey, "someone-else", 0)
	s.expect(t, s.do(t, "DELETE", "/steps/A", ""), 200, map[string]any{"crashed": true, "left": nil, "forgot": "0"})
	if got := s.rdb.Get(ctx, lockKey).Val(); got != "someone-else" {
		t.Fatalf("the reset of a crashed sale touched another's lock: the key holds %q", got)
	}
	s.rdb.Del(ctx, lockKey)

	// Its own lock, a string (v3) or a hash (v7): the reset removes it.
	for _, lock := range []string{"v3", "v7"} {
		id := "C-" + lock
		holding(id, lock)
		s.expect(t, s.do(t, "POST", "/steps/"+id+"/crash", ""), 200, map[string]any{"crashed": true, "left": true})
		if s.rdb.Exists(ctx, lockKey).Val() != 1 {
			t.Fatalf("%s: the crashed sale's lock is gone before the reset", lock)
		}
		s.expect(t, s.do(t, "POST", "/sale?step="+id+"&lock=v4", ""), 400, map[string]any{"code": "bad_request"}) // its id kept until forgotten
		s.expect(t, s.do(t, "DELETE", "/steps/"+id, ""), 200, map[string]any{"left": nil, "forgot": "1"})
		if s.rdb.Exists(ctx, lockKey).Val() != 0 {
			t.Fatalf("%s: the reset left the crashed sale's lock", lock)
		}
	}

	// Where a reset could not remove what a crash leaves, it is refused.
	s.expect(t, s.do(t, "POST", "/sale?step=D&lock=redlock", ""), 202, map[string]any{"state": "stopped"})
	s.expect(t, s.do(t, "POST", "/steps/D/crash", ""), 400, map[string]any{"code": "bad_request"})
	s.expect(t, s.do(t, "DELETE", "/steps/D", ""), 200, map[string]any{"state": "done"})
	if s.stock(t) != "10" {
		t.Fatalf("the stock is %s, want 10: nothing sold", s.stock(t))
	}
}

// A crashed sale's lock is removed once nobody reads the sale (the page
// went away), as the bound would: nothing is left behind.
func TestSteppedCrashAbandoned(t *testing.T) {
	g := step.New(step.Options{Idle: 300 * time.Millisecond})
	t.Cleanup(g.Close)
	s := newStack(t, options{lock: "v6", override: true, steps: g, lessonLease: 10 * time.Second})
	ctx := context.Background()
	s.rdb.Set(ctx, api.DefaultStockKey, 10, 0)
	s.expect(t, s.do(t, "POST", "/sale?step=A&lock=v3", ""), 202, map[string]any{"phase": "acquire"})
	s.expect(t, s.do(t, "POST", "/steps/A/next", ""), 200, map[string]any{"phase": "stock"})
	s.expect(t, s.do(t, "POST", "/steps/A/crash", ""), 200, map[string]any{"crashed": true, "left": true})
	crashed := time.Now()
	locktest.WaitFor(t, 5*time.Second, "the abandoned crashed sale's lock removed", func() bool {
		return s.rdb.Exists(ctx, api.DefaultLockKey).Val() == 0
	})
	if took := time.Since(crashed); took < 250*time.Millisecond {
		t.Fatalf("the lock went %s after the crash, before the sale was abandoned (300 ms unread)", took)
	}
}

// A v8 stepped sale stopped before a step may be paused and resumed; while
// paused it takes no step; a pause is refused for a lock with no background
// work to freeze, and where the sale is not stopped; the reset cancels a
// paused sale, which releases its lock.
func TestSteppedPause(t *testing.T) {
	g := step.New(step.Options{})
	t.Cleanup(g.Close)
	s := newStack(t, options{lock: "v6", override: true, steps: g, lessonLease: 7 * time.Second})
	ctx := context.Background()
	s.rdb.Set(ctx, api.DefaultStockKey, 10, 0)

	s.expect(t, s.do(t, "POST", "/sale?step=A&lock=v6", ""), 202, map[string]any{"state": "stopped"})
	r := s.do(t, "POST", "/steps/A/pause", "")
	s.expect(t, r, 400, map[string]any{"code": "bad_request"})
	if msg, _ := r.body["error"].(string); !strings.Contains(msg, "watchdog") {
		t.Fatalf("pause refused with %q: want why (no watchdog to freeze)", msg)
	}
	s.expect(t, s.do(t, "DELETE", "/steps/A", ""), 200, map[string]any{"state": "done"})

	s.expect(t, s.do(t, "POST", "/sale?step=B&lock=v8", ""), 202, map[string]any{"state": "stopped"})
	s.expect(t, s.do(t, "POST", "/steps/B/resume", ""), 409, map[string]any{"code": "not_stopped"})
	for i := 0; s.do(t, "GET", "/steps/B", "").body["phase"] != "stock"; i++ { // its acquire (a NOSCRIPT sent again, nested)
		if i > 5 {
			t.Fatal("B never reached its stock phase")
		}
		s.expect(t, s.do(t, "POST", "/steps/B/next", ""), 200, map[string]any{"state": "stopped"})
	}
	s.expect(t, s.do(t, "POST", "/steps/B/pause", ""), 200, map[string]any{"state": "stopped", "paused": true})
	s.expect(t, s.do(t, "POST", "/steps/B/pause", ""), 409, map[string]any{"code": "not_stopped"})
	s.expect(t, s.do(t, "POST", "/steps/B/next", ""), 409, map[string]any{"code": "not_stopped"})
	s.expect(t, s.do(t, "POST", "/steps/B/end", ""), 409, map[string]any{"code": "not_stopped"})
	r = s.do(t, "POST", "/steps/B/resume", "")
	s.expect(t, r, 200, map[string]any{"state": "stopped"})
	if r.body["paused"] != nil {
		t.Fatalf("after the resume: %v, want not paused", r.body)
	}
	s.expect(t, s.do(t, "POST", "/steps/B/pause", ""), 200, map[string]any{"paused": true})
	if s.rdb.Exists(ctx, api.DefaultLockKey).Val() != 1 {
		t.Fatal("B holds no lock while paused after its acquire")
	}
	s.expect(t, s.do(t, "DELETE", "/steps/B", ""), 200, map[string]any{"state": "done"})
	if s.rdb.Exists(ctx, api.DefaultLockKey).Val() != 0 || s.stock(t) != "10" {
		t.Fatalf("after the reset of a paused sale: lock key left, or stock %s (want 10)", s.stock(t))
	}
	s.expect(t, s.do(t, "POST", "/steps/B/pause", ""), 409, map[string]any{"code": "not_stopped"})
}
