package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/retry"
	"github.com/redis/go-redis/v9"
)

// WaitFor polls cond, an observable state (a key gone, a goroutine count),
// until it holds, and fails the test if it does not within limit.
func WaitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Waits asserts that owner's Acquire on g, made while the lock is held, waits
// until its deadline (30ms) instead of being granted or failing.
func Waits(t *testing.T, g Locker, owner string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if l, err := g.Acquire(ctx, owner); !errors.Is(err, context.DeadlineExceeded) {
		if err == nil {
			_ = l.Release(context.Background())
		}
		t.Fatalf("Acquire by %q while the lock is held: err = %v, want context.DeadlineExceeded", owner, err)
	}
}

// NotReentrant asserts that a holder of g asking for g again waits on
// itself (Waits), then releases.
func NotReentrant(t *testing.T, g Locker) {
	t.Helper()
	ctx := context.Background()
	held, err := g.Acquire(ctx, "owner")
	if err != nil {
		t.Fatal(err)
	}
	Waits(t, g, "owner")
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// Successor waits until key has expired in rdb (the holder's lease ran out),
// then takes the lock on g as owner: the next holder walking in.
func Successor(t *testing.T, rdb *redis.Client, key string, g Locker, owner string) {
	t.Helper()
	ctx := context.Background()
	WaitFor(t, 5*time.Second, "the holder's lease to expire", func() bool { return rdb.Exists(ctx, key).Val() == 0 })
	if _, err := g.Acquire(ctx, owner); err != nil {
		t.Error(err) // also called from hooks on other goroutines: no Fatal
	}
}

// OneAttempt asserts that g makes one attempt: with the lock held by one
// owner, another owner's TryAcquire answers lease.ErrTaken at once, and does
// not wait (its context would end it with a deadline error after 5 s).
func OneAttempt(t *testing.T, g retry.Guard) {
	t.Helper()
	ctx := context.Background()
	held, err := g.TryAcquire(ctx, "holder")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if l, err := g.TryAcquire(tctx, "other"); !errors.Is(err, lease.ErrTaken) {
		if err == nil {
			_ = l.Release(ctx)
		}
		t.Fatalf("TryAcquire of a held lock: err = %v, want lease.ErrTaken", err)
	}
}
