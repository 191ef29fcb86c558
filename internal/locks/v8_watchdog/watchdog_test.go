package watchdog_test

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	reentrant "github.com/locklab/locklab/internal/locks/v7_reentrant"
	watchdog "github.com/locklab/locklab/internal/locks/v8_watchdog"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
)

var quiet = slog.New(slog.DiscardHandler)

func TestExcludesAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	o := reentrant.Options{Key: "lock:" + t.Name(), TTL: 20 * time.Second, Retry: time.Millisecond}
	a, b := watchdog.New(srv.Client(), o, quiet), watchdog.New(srv.Client(), o, quiet)
	defer a.Close()
	defer b.Close()
	locktest.Exclusion(t, srv.Client(), a, b)
}

// dogs counts the watchdog goroutines alive now, from their stacks: exact,
// where the process's total goroutine count also moves with the test's own
// helpers.
func dogs() int {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	// Every goroutine the watchdog starts carries this line, whether it is
	// running, waiting, or not yet scheduled (then its top frame is a wrapper).
	return strings.Count(b.String(), "created by github.com/locklab/locklab/internal/locks/v8_watchdog.(*Locker).start")
}

// goroutinesBack waits until the goroutine count is back to base.
func goroutinesBack(t *testing.T, base int, what string) {
	t.Helper()
	locktest.WaitFor(t, 5*time.Second, what, func() bool { return runtime.NumGoroutine() <= base })
}

// While held, the watchdog keeps the lock alive well past its TTL; after
// release the lock is gone, no goroutine is left, and so nothing renews it.
// A nested hold shares the outer hold's watchdog.
func TestRenewsWhileHeldOnly(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	const ttl = 300 * time.Millisecond // renewed every 100ms: 200ms of slack for a busy scheduler
	l := watchdog.New(rdb, reentrant.Options{Key: "lock", TTL: ttl, Retry: time.Millisecond}, quiet)
	defer l.Close()
	if err := rdb.Ping(ctx).Err(); err != nil { // open the pool's connection before counting
		t.Fatal(err)
	}
	base := runtime.NumGoroutine()

	outer, err := l.Acquire(ctx, "owner")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := l.Acquire(ctx, "owner")
	if err != nil {
		t.Fatal(err)
	}
	if n := dogs(); n != 1 {
		t.Fatalf("watchdogs while held twice = %d, want 1", n)
	}

	// Held past 3 x TTL: the lock must be there, ours, the whole time.
	for start := time.Now(); time.Since(start) < 4*ttl; time.Sleep(5 * time.Millisecond) {
		if n := rdb.HGet(ctx, "lock", "owner").Val(); n != "2" {
			t.Fatalf("after %v of a %v lease: hold count = %q, want 2 (the watchdog let it expire)", time.Since(start), ttl, n)
		}
	}

	if err := inner(ctx); err != nil {
		t.Fatal(err)
	}
	if err := outer(ctx); err != nil {
		t.Fatal(err)
	}
	if rdb.Exists(ctx, "lock").Val() != 0 {
		t.Fatal("lock still there after release")
	}
	locktest.WaitFor(t, 5*time.Second, "the watchdog to stop after release", func() bool { return dogs() == 0 })
	goroutinesBack(t, base, "the goroutine count to return to where it was")
}

// When the lease is lost anyway (the key deleted behind its back), the watchdog
// notices at its next tick and stops instead of renewing a lock it lost.
func TestStopsWhenLeaseLost(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	l := watchdog.New(rdb, reentrant.Options{Key: "lock", TTL: 90 * time.Millisecond, Retry: time.Millisecond}, quiet)
	defer l.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	base := runtime.NumGoroutine()
	release, err := l.Acquire(ctx, "owner")
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx, "lock").Err(); err != nil {
		t.Fatal(err)
	}
	locktest.WaitFor(t, 5*time.Second, "the watchdog to stop once the lease is lost", func() bool { return dogs() == 0 })
	goroutinesBack(t, base, "the goroutine count to return to where it was")
	if rdb.Exists(ctx, "lock").Val() != 0 {
		t.Fatal("the watchdog recreated a lost lock")
	}
	if err := release(ctx); err == nil {
		t.Fatal("release of a lost lock succeeded; want reentrant.ErrNotHeld")
	}
}

func TestFencingTokensGrow(t *testing.T) {
	rdb := redistest.Start(t).Client()
	l := watchdog.New(rdb, reentrant.Options{Key: "lock", TTL: time.Second, Retry: time.Millisecond}, quiet)
	defer l.Close()
	locktest.Tokens(t, l)
}

// Includes starting and stopping the watchdog goroutine.
func BenchmarkAcquireRelease(b *testing.B) {
	rdb := redistest.Start(b).Client()
	l := watchdog.New(rdb, reentrant.Options{Key: "bench", TTL: 20 * time.Second, Retry: time.Millisecond}, quiet)
	defer l.Close()
	locktest.BenchAcquireRelease(b, l)
}
