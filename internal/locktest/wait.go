package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/chaos"
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

// WakeUp asserts what wakes a waiter on waiter when holder's release frees
// the lock, and that the wake-up switch (chaos.Off.Wake, make mutations'
// lost-wakeup) takes exactly that away: with it on, the waiter takes the
// lock well within its deadline of the release; switched off in the
// waiter's request, it is told nothing and answers its deadline, and the
// lock is free for the next to ask. waiting is called as each waiter
// starts and returns its condition: from observable state (its key or node
// queued, an attempt of its answered), that it waits.
func WakeUp(t *testing.T, holder, waiter Locker, waiting func() (parked func() bool)) {
	t.Helper()
	const deadline = 1500 * time.Millisecond
	for _, off := range []bool{false, true} {
		ctx := context.Background()
		if off {
			ctx = chaos.With(ctx, chaos.Faults{Off: chaos.Off{Wake: true}})
		}
		held, err := holder.Acquire(context.Background(), "holder")
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			l   lease.Lease
			err error
			at  time.Time
		}
		done := make(chan result, 1)
		parked := waiting()
		wctx, cancel := context.WithTimeout(ctx, deadline)
		go func() {
			l, err := waiter.Acquire(wctx, "waiter")
			done <- result{l, err, time.Now()}
		}()
		WaitFor(t, deadline/2, "the waiter to wait", parked)
		released := time.Now()
		if err := held.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		r := <-done
		cancel()
		took := r.at.Sub(released).Round(time.Millisecond)
		switch {
		case !off && r.err != nil:
			t.Fatalf("woken: the waiter %v after the release", r.err)
		case !off && took > deadline/3:
			t.Fatalf("woken: the waiter took the lock %s after the release, on a %s deadline", took, deadline)
		case off && r.err == nil:
			_ = r.l.Release(context.Background())
			t.Fatalf("its wake-up switched off, the waiter took the lock %s after the release", took)
		case off && !errors.Is(r.err, context.DeadlineExceeded):
			t.Fatalf("its wake-up switched off, the waiter: %v, want its deadline", r.err)
		}
		if r.l != nil {
			if err := r.l.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("wake-up off %v: the waiter answered %s after the release (err %v)", off, took, r.err)
	}
	// Stranded, the waiter left the lock free behind it.
	tctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l, err := holder.Acquire(tctx, "after")
	if err != nil {
		t.Fatalf("after the stranded waiter: %v", err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}
