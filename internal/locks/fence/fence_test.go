package fence_test

import (
	"context"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/locks/fence"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
)

func TestTrySetNX(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()

	// No TTL: no expiry (v3), and the first token is 1.
	ok, tok, err := fence.SetNX(ctx, rdb, "a", "owner", 0, true)
	if err != nil || !ok || tok != 1 {
		t.Fatalf("obtained %v, token %d, err %v; want token 1", ok, tok, err)
	}
	if pttl := rdb.PTTL(ctx, "a").Val(); pttl != -1 {
		t.Fatalf("PTTL %v, want -1 (no expiry)", pttl)
	}
	// Held: no token, and the counter does not move.
	if ok, tok, err := fence.SetNX(ctx, rdb, "a", "other", 0, true); err != nil || ok || tok != 0 {
		t.Fatalf("while held: obtained %v, token %d, err %v; want not obtained", ok, tok, err)
	}
	if n := rdb.Get(ctx, fence.CounterKey("a")).Val(); n != "1" {
		t.Fatalf("counter %q after a refused attempt, want 1", n)
	}
	// A lease shorter than a millisecond still expires (it must not become 0 = no expiry).
	ok, tok, err = fence.SetNX(ctx, rdb, "b", "owner", 500*time.Microsecond, true)
	if err != nil || !ok || tok != 1 {
		t.Fatalf("obtained %v, token %d, err %v; want token 1", ok, tok, err)
	}
	locktest.WaitFor(t, 5*time.Second, "the sub-millisecond lease to expire", func() bool { return rdb.Exists(ctx, "b").Val() == 0 })
	if ok, tok, err := fence.SetNX(ctx, rdb, "b", "next", time.Second, true); err != nil || !ok || tok != 2 {
		t.Fatalf("next holder: obtained %v, token %d, err %v; want token 2", ok, tok, err)
	}
	// Unfenced: the plain SET NX, no token, the counter untouched.
	if ok, tok, err := fence.SetNX(ctx, rdb, "c", "owner", time.Second, false); err != nil || !ok || tok != 0 {
		t.Fatalf("unfenced: obtained %v, token %d, err %v; want obtained, token 0", ok, tok, err)
	}
	if ok, _, err := fence.SetNX(ctx, rdb, "c", "other", time.Second, false); err != nil || ok {
		t.Fatalf("unfenced, while held: obtained %v, err %v; want not obtained", ok, err)
	}
	if n := rdb.Exists(ctx, fence.CounterKey("c")).Val(); n != 0 {
		t.Fatal("an unfenced SET NX touched the counter")
	}
}
