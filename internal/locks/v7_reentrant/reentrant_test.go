package reentrant_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/lease"
	reentrant "github.com/locklab/locklab/internal/locks/v7_reentrant"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
)

func TestExcludesAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	o := reentrant.Options{Key: "lock:" + t.Name(), TTL: 20 * time.Second}
	locktest.Exclusion(t, srv.Client(), locktest.Poll(reentrant.New(srv.Client(), o)), locktest.Poll(reentrant.New(srv.Client(), o)))
}

// The tutorial sent 20 s as a time.Duration to EXPIRE: 20,000,000,000 s. The
// lease must be within the TTL, and the lock must really expire.
func TestLeaseIsMilliseconds(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	o := reentrant.Options{Key: "lock", TTL: 20 * time.Second}
	l, err := reentrant.New(rdb, o).TryAcquire(ctx, "owner")
	if err != nil {
		t.Fatal(err)
	}
	if pttl := rdb.PTTL(ctx, "lock").Val(); pttl <= 0 || pttl > o.TTL {
		t.Fatalf("PTTL = %v, want in (0, %v]", pttl, o.TTL)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	o.TTL = 50 * time.Millisecond
	if _, err := reentrant.New(rdb, o).TryAcquire(ctx, "owner"); err != nil {
		t.Fatal(err)
	}
	locktest.WaitFor(t, 5*time.Second, "the 50ms lease to expire", func() bool { return rdb.Exists(ctx, "lock").Val() == 0 })
}

func TestReentrantCounts(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	l := locktest.Poll(reentrant.New(rdb, reentrant.Options{Key: "lock", TTL: 20 * time.Second}))
	outer, err := l.Acquire(ctx, "owner")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := l.Acquire(ctx, "owner")
	if err != nil {
		t.Fatalf("nested Acquire by the same owner: %v", err)
	}
	if n := rdb.HGet(ctx, "lock", "owner").Val(); n != "2" {
		t.Fatalf("hold count = %q, want 2", n)
	}

	locktest.Waits(t, l, "other")

	if err := inner.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rdb.HGet(ctx, "lock", "owner").Val(); n != "1" {
		t.Fatalf("hold count after one release = %q, want 1", n)
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if rdb.Exists(ctx, "lock").Val() != 0 {
		t.Fatal("lock still there after the outermost release")
	}
	if err := outer.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("release of a lock not held: err = %v, want ErrNotHeld", err)
	}
}

// Tokens grow per holder; a nested hold keeps its outer hold's token.
func TestFencingTokens(t *testing.T) {
	rdb := redistest.Start(t).Client()
	l := locktest.Poll(reentrant.New(rdb, reentrant.Options{Key: "lock", TTL: time.Second, Fence: true}))
	locktest.Tokens(t, l)
	ctx := context.Background()
	outer, err := l.Acquire(ctx, "owner")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := l.Acquire(ctx, "owner")
	if err != nil || inner.Token() != outer.Token() {
		t.Fatalf("nested hold: token %d (err %v), want the outer hold's %d", inner.Token(), err, outer.Token())
	}
	if err := errors.Join(inner.Release(ctx), outer.Release(ctx)); err != nil {
		t.Fatal(err)
	}
	next, err := l.Acquire(ctx, "next")
	if err != nil || next.Token() <= outer.Token() {
		t.Fatalf("next holder: token %d (err %v), want > %d", next.Token(), err, outer.Token())
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	rdb := redistest.Start(b).Client()
	locktest.BenchAcquireRelease(b, locktest.Poll(reentrant.New(rdb, reentrant.Options{Key: "bench", TTL: 20 * time.Second})))
}

func TestOneAttempt(t *testing.T) {
	locktest.OneAttempt(t, reentrant.New(redistest.Start(t).Client(), reentrant.Options{}))
}
