package setnx_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/chaos"
	setnx "github.com/locklab/locklab/internal/locks/v3_setnx"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/redis/go-redis/v9"
)

var versions = map[string]setnx.Options{
	"v3": {Retry: time.Millisecond},
	"v4": {TTL: 20 * time.Second, Retry: time.Millisecond},
	"v5": {TTL: 20 * time.Second, Retry: time.Millisecond, OwnerCheck: true},
}

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
			locktest.Exclusion(t, srv.Client(),
				setnx.New(srv.Client(), o), setnx.New(srv.Client(), o))
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
			release, err := setnx.New(rdb, o).Acquire(ctx, "owner")
			if err != nil {
				t.Fatal(err)
			}
			defer release(ctx)
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
func expireThenSuccessor(t *testing.T, rdb *redis.Client, o setnx.Options) func(context.Context) error {
	t.Helper()
	ctx := context.Background()
	l := setnx.New(rdb, o)
	releaseA, err := l.Acquire(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	locktest.Successor(t, rdb, o.Key, l, "B")
	return releaseA
}

// v4's blind DEL removes the lock its successor holds: the flaw v5 fixes.
func TestV4DeletesSuccessorsLock(t *testing.T) {
	rdb := redistest.Start(t).Client()
	o := opts(t, setnx.Options{TTL: 50 * time.Millisecond, Retry: time.Millisecond})
	releaseA := expireThenSuccessor(t, rdb, o)
	if err := releaseA(context.Background()); err != nil {
		t.Fatalf("v4 release: %v (it cannot tell the lock is not its own)", err)
	}
	if n := rdb.Exists(context.Background(), o.Key).Val(); n != 0 {
		t.Fatal("B's lock survived A's DEL; v4 is expected to delete it")
	}
}

// v5 checks the owner: A's late release leaves B's lock alone.
func TestV5KeepsSuccessorsLock(t *testing.T) {
	rdb := redistest.Start(t).Client()
	o := opts(t, setnx.Options{TTL: 50 * time.Millisecond, Retry: time.Millisecond, OwnerCheck: true})
	releaseA := expireThenSuccessor(t, rdb, o)
	if err := releaseA(context.Background()); !errors.Is(err, setnx.ErrNotHeld) {
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
	l := setnx.New(rdb, o)
	release, err := l.Acquire(context.Background(), "holder")
	if err != nil {
		t.Fatal(err)
	}
	defer release(context.Background())
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
	_, err := setnx.New(rdb, opts(t, versions["v4"])).Acquire(ctx, "owner")
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a connection error before the deadline", err)
	}
}

func TestFencingTokensGrow(t *testing.T) {
	srv := redistest.Start(t)
	for name, o := range versions {
		t.Run(name, func(t *testing.T) {
			locktest.Tokens(t, setnx.New(srv.Client(), opts(t, o)))
		})
	}
}

// v5's GET and DEL are two commands: a successor that takes the lock between
// them loses it to the DEL (the lesson v6 fixes).
func TestV5ReleaseRaceDeletesSuccessorsLock(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	o := opts(t, setnx.Options{TTL: 50 * time.Millisecond, Retry: time.Millisecond, OwnerCheck: true})
	l := setnx.New(rdb, o)
	releaseA, err := l.Acquire(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	// The hook runs between the GET and the DEL: the lease expires there and B
	// walks in, so the DEL runs with the lock in B's hands.
	hook := func(context.Context) { locktest.Successor(t, rdb, o.Key, l, "B") }
	if err := releaseA(chaos.With(ctx, chaos.Faults{BeforeDelete: hook})); err != nil {
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
		b.Run(name, func(b *testing.B) { locktest.BenchAcquireRelease(b, setnx.New(rdb, o)) })
	}
}
