package redislock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/redislock"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redisconn"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/internal/sale"
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

// A node that stops answering while a sale waits for the lock is an outage
// (503 unavailable), not a lock timeout, even when the attempt it stalls
// fails past the acquire deadline (a node that does not answer fails a
// command at its read timeout; the library's attempts run on the caller's
// context). A node stopped fails the next attempt at once, also an outage;
// a lock that another holds until the deadline is still a lock timeout.
func TestRedislockOutageIsNotALockTimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   func(*redistest.Server)
		timeout bool // want sale.ErrLockTimeout
	}{
		{"held", func(*redistest.Server) {}, true},
		{"stopped", (*redistest.Server).Stop, false},
		{"frozen", func(s *redistest.Server) { s.Freeze(true) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.Start(t)
			ctx := context.Background()
			opts := redislock.Options{Key: "lock", TTL: 20 * time.Second}
			if _, err := redislock.New(s.Client(), opts).Acquire(ctx, "holder"); err != nil {
				t.Fatal(err)
			}
			// The waiter's reads time out after 3 s, past its acquire
			// deadline of 1 s: a frozen node stalls its attempt across the
			// deadline.
			o := redisconn.Options(s.Addr, "")
			o.ReadTimeout = 3 * time.Second
			rdb := redis.NewClient(o)
			t.Cleanup(func() { rdb.Close() })
			var tries atomic.Int32
			rdb.AddHook(counted{&tries})
			waiter := sale.New(rdb, sale.Options{AcquireTimeout: time.Second})
			done := make(chan error, 1)
			go func() {
				_, err := waiter.Sell(ctx, sale.Method{Lock: redislock.New(rdb, opts)})
				done <- err
			}()
			locktest.WaitFor(t, 5*time.Second, "an attempt that found the lock taken", func() bool { return tries.Load() > 0 })
			tc.fault(s)
			err := <-done
			if err == nil || errors.Is(err, sale.ErrLockTimeout) != tc.timeout {
				t.Fatalf("the waiter: %v; want a lock timeout: %v", err, tc.timeout)
			}
		})
	}
}

// counted counts the commands of the client it hooks that Redis answered.
type counted struct{ n *atomic.Int32 }

func (counted) DialHook(next redis.DialHook) redis.DialHook { return next }
func (counted) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (c counted) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil || errors.Is(err, redis.Nil) {
			c.n.Add(1)
		}
		return err
	}
}

// The library has no wake-up: a waiter learns of a release at its next
// poll. A waiter whose request switched its wake-up off (make mutations'
// lost-wakeup) polls no more after its first attempt, and waits out its
// deadline with the lock free.
func TestRedislockWakeUp(t *testing.T) {
	s := redistest.Start(t)
	opts := redislock.Options{Key: "lock", TTL: 10 * time.Second, Retry: 5 * time.Millisecond}
	rdb := redisconn.New(s.Addr, "")
	t.Cleanup(func() { rdb.Close() })
	var tries atomic.Int32
	rdb.AddHook(counted{&tries})
	holder := redislock.New(s.Client(), opts)
	locktest.WakeUp(t, holder, redislock.New(rdb, opts), func() func() bool {
		before := tries.Load()
		return func() bool { return tries.Load() > before } // an attempt of the waiter's answered: the lock taken
	})
}

// A waiter whose deadline comes while the lock stays taken is told the lock
// was not obtained, not that Redis failed (context.DeadlineExceeded is a
// net.Error: it was once read as the network's).
func TestRedislockDeadlineIsNotObtained(t *testing.T) {
	s := redistest.Start(t)
	opts := redislock.Options{Key: "lock", TTL: 10 * time.Second, Retry: 5 * time.Millisecond}
	g := redislock.New(s.Client(), opts)
	held, err := g.Acquire(context.Background(), "holder")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = g.Acquire(ctx, "waiter")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "lock not obtained") {
		t.Fatalf("the waiter at its deadline: %v, want the lock not obtained by the deadline", err)
	}
}
