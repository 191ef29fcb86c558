package setnx_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/lease"
	setnx "github.com/locklab/locklab/internal/locks/v3_setnx"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/redis/go-redis/v9"
)

var versions = map[string]setnx.Options{
	"v3": {},
	"v4": {TTL: 20 * time.Second},
	"v5": {TTL: 20 * time.Second, OwnerCheck: true},
}

// poll is the lock o describes, waiting as the tests do.
func poll(rdb setnx.Client, o setnx.Options) locktest.Locker { return locktest.Poll(setnx.New(rdb, o)) }

func opts(t *testing.T, o setnx.Options) setnx.Options {
	o.Key = "lock:" + t.Name()
	return o
}

// Two replicas (two clients, two lockers) never hold the lock at once.
func TestExcludesAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	for name, o := range versions {
		t.Run(name, func(t *testing.T) {
			o := opts(t, o)
			locktest.Exclusion(t, srv.Client(), poll(srv.Client(), o), poll(srv.Client(), o))
		})
	}
}

// v3 sets no expiry (its deadlock); v4 and v5 set one within the TTL, sent in
// seconds or milliseconds, never nanoseconds.
func TestExpiry(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	for name, o := range versions {
		t.Run(name, func(t *testing.T) {
			o := opts(t, o)
			l, err := setnx.New(rdb, o).TryAcquire(ctx, "owner")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(ctx)
			pttl, err := rdb.PTTL(ctx, o.Key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if o.TTL == 0 && pttl != -1 {
				t.Fatalf("v3 lock PTTL = %v, want -1 (no expiry)", pttl)
			}
			if o.TTL > 0 && (pttl <= 0 || pttl > o.TTL) {
				t.Fatalf("PTTL = %v, want in (0, %v]", pttl, o.TTL)
			}
		})
	}
}

// expireThenSuccessor lets owner A's short lease run out and owner B take the
// lock, and returns A's release.
func expireThenSuccessor(t *testing.T, rdb *redis.Client, o setnx.Options) lease.Lease {
	t.Helper()
	ctx := context.Background()
	l := poll(rdb, o)
	a, err := l.Acquire(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	locktest.Successor(t, rdb, o.Key, l, "B")
	return a
}

// v4's blind DEL removes the lock its successor holds: the flaw v5 fixes.
func TestV4DeletesSuccessorsLock(t *testing.T) {
	rdb := redistest.Start(t).Client()
	o := opts(t, setnx.Options{TTL: 50 * time.Millisecond})
	a := expireThenSuccessor(t, rdb, o)
	if err := a.Release(context.Background()); err != nil {
		t.Fatalf("v4 release: %v (it cannot tell the lock is not its own)", err)
	}
	if n := rdb.Exists(context.Background(), o.Key).Val(); n != 0 {
		t.Fatal("B's lock survived A's DEL; v4 is expected to delete it")
	}
}

// v5 checks the owner: A's late release leaves B's lock alone.
func TestV5KeepsSuccessorsLock(t *testing.T) {
	rdb := redistest.Start(t).Client()
	o := opts(t, setnx.Options{TTL: 50 * time.Millisecond, OwnerCheck: true})
	a := expireThenSuccessor(t, rdb, o)
	if err := a.Release(context.Background()); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("A's late release: err = %v, want ErrNotHeld", err)
	}
	if v := rdb.Get(context.Background(), o.Key).Val(); v != "B" {
		t.Fatalf("lock holds %q after A's release, want B's", v)
	}
}

// A waiter gives up at its deadline and leaves the holder's lock as it was.
func TestWaitEndsWithContext(t *testing.T) {
	rdb := redistest.Start(t).Client()
	o := opts(t, versions["v4"])
	l := poll(rdb, o)
	h, err := l.Acquire(context.Background(), "holder")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(context.Background())
	locktest.Waits(t, l, "waiter")
	if v := rdb.Get(context.Background(), o.Key).Val(); v != "holder" {
		t.Fatalf("lock holds %q, want holder", v)
	}
}

// Redis down is an error at once, not a wait until the deadline.
func TestRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := poll(rdb, opts(t, versions["v4"])).Acquire(ctx, "owner")
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a connection error before the deadline", err)
	}
}

func TestFencingTokensGrow(t *testing.T) {
	srv := redistest.Start(t)
	for name, o := range versions {
		t.Run(name, func(t *testing.T) {
			o := opts(t, o)
			o.Fence = true
			locktest.Tokens(t, poll(srv.Client(), o))
		})
	}
}

// v5's GET and DEL are two commands: a successor that takes the lock between
// them loses it to the DEL (the lesson v6 fixes).
func TestV5ReleaseRaceDeletesSuccessorsLock(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	o := opts(t, setnx.Options{TTL: 50 * time.Millisecond, OwnerCheck: true})
	l := poll(rdb, o)
	a, err := l.Acquire(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	// The hook runs between the GET and the DEL: the lease expires there and B
	// walks in, so the DEL runs with the lock in B's hands.
	hook := func(context.Context) { locktest.Successor(t, rdb, o.Key, l, "B") }
	if err := a.Release(chaos.With(ctx, chaos.Faults{BeforeDelete: hook})); err != nil {
		t.Fatalf("A's release: %v (its GET saw its own value, so it goes on to DEL)", err)
	}
	if rdb.Exists(ctx, o.Key).Val() != 0 {
		t.Fatal("B's lock survived; v5 is expected to delete it in the race")
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	rdb := redistest.Start(b).Client()
	for _, name := range []string{"v3", "v4", "v5"} {
		o := versions[name]
		o.Key = "bench:" + name
		b.Run(name, func(b *testing.B) { locktest.BenchAcquireRelease(b, poll(rdb, o)) })
	}
}

func TestOneAttempt(t *testing.T) {
	rdb := redistest.Start(t).Client()
	for name, o := range versions {
		t.Run(name, func(t *testing.T) { locktest.OneAttempt(t, setnx.New(rdb, opts(t, o))) })
	}
}
