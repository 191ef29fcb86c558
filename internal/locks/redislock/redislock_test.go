package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/redislock"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
)

// Two Lockers on two clients (two replicas) never hold the lock at once and
// lose no update; a nested acquisition waits on itself; a holder whose lease
// ran out learns it only at its release (not held).
func TestRedislock(t *testing.T) {
	s := redistest.Start(t)
	a := redislock.New(s.Client(), redislock.Options{Key: "lock", TTL: 10 * time.Second, Retry: time.Millisecond})
	b := redislock.New(s.Client(), redislock.Options{Key: "lock", TTL: 10 * time.Second, Retry: time.Millisecond})
	locktest.Exclusion(t, s.Client(), a, b)
	locktest.NotReentrant(t, a)

	ctx := context.Background()
	short := redislock.New(s.Client(), redislock.Options{Key: "short", TTL: 100 * time.Millisecond, Retry: time.Millisecond})
	held, err := short.Acquire(ctx, "slow")
	if err != nil {
		t.Fatal(err)
	}
	if held.Lost() != nil || held.Token() != 0 {
		t.Fatal("the library's lease cannot say it is lost, and has no token")
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	next, err := short.Acquire(wctx, "next") // waits for the expiry
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("the expired holder's release: %v, want not held", err)
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A node that does not answer is an error, not a lock that is taken.
func TestRedislockNodeDown(t *testing.T) {
	s := redistest.Start(t)
	l := redislock.New(s.Client(), redislock.Options{Key: "lock", Retry: time.Millisecond})
	s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := l.Acquire(ctx, "owner"); err == nil || ctx.Err() != nil {
		t.Fatalf("with the node down: %v (deadline reached: %v), want Redis' error at once", err, ctx.Err())
	}
}
