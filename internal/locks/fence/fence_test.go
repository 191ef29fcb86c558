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
	tok, err := fence.TrySetNX(ctx, rdb, "a", "owner", 0)
	if err != nil || tok != 1 {
		t.Fatalf("token %d, err %v; want 1", tok, err)
	}
	if pttl := rdb.PTTL(ctx, "a").Val(); pttl != -1 {
		t.Fatalf("PTTL %v, want -1 (no expiry)", pttl)
	}
	// Held: no token, and the counter does not move.
	if tok, err := fence.TrySetNX(ctx, rdb, "a", "other", 0); err != nil || tok != 0 {
		t.Fatalf("while held: token %d, err %v; want 0", tok, err)
	}
	if n := rdb.Get(ctx, fence.CounterKey("a")).Val(); n != "1" {
		t.Fatalf("counter %q after a refused attempt, want 1", n)
	}
	// A lease shorter than a millisecond still expires (it must not become 0 = no expiry).
	tok, err = fence.TrySetNX(ctx, rdb, "b", "owner", 500*time.Microsecond)
	if err != nil || tok != 1 {
		t.Fatalf("token %d, err %v; want 1", tok, err)
	}
	locktest.WaitFor(t, 5*time.Second, "the sub-millisecond lease to expire", func() bool { return rdb.Exists(ctx, "b").Val() == 0 })
	if tok, err := fence.TrySetNX(ctx, rdb, "b", "next", time.Second); err != nil || tok != 2 {
		t.Fatalf("next holder: token %d, err %v; want 2", tok, err)
	}
}
