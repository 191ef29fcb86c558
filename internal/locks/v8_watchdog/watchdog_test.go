package watchdog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/lease"
	reentrant "github.com/locklab/locklab/internal/locks/v7_reentrant"
	watchdog "github.com/locklab/locklab/internal/locks/v8_watchdog"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/redis/go-redis/v9"
)

var quiet = slog.New(slog.DiscardHandler)

func TestExcludesAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	o := reentrant.Options{Key: "lock:" + t.Name(), TTL: 20 * time.Second}
	locktest.Exclusion(t, srv.Client(), locktest.Poll(watchdog.New(srv.Client(), o, quiet, nil)), locktest.Poll(watchdog.New(srv.Client(), o, quiet, nil)))
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
	obs := &counts{}
	l := locktest.Poll(watchdog.New(rdb, reentrant.Options{Key: "lock", TTL: ttl}, quiet, obs))
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

	if lease.IsLost(outer) || lease.IsLost(inner) {
		t.Fatal("a lease renewed all along is reported lost")
	}
	if err := inner.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if rdb.Exists(ctx, "lock").Val() != 0 {
		t.Fatal("lock still there after release")
	}
	if obs.renewed.Load() < 3 || obs.lost.Load() != 0 {
		t.Fatalf("observer: %d renewals, %d lost; want >= 3 and 0", obs.renewed.Load(), obs.lost.Load())
	}
	locktest.WaitFor(t, 5*time.Second, "the watchdog to stop after release", func() bool { return dogs() == 0 })
	goroutinesBack(t, base, "the goroutine count to return to where it was")
}

// counts is an Observer that counts.
type counts struct{ renewed, lost atomic.Int64 }

func (c *counts) Renewed()   { c.renewed.Add(1) }
func (c *counts) LeaseLost() { c.lost.Add(1) }

// When the lease is lost anyway (the key deleted behind its back), the watchdog
// notices at its next tick, closes the lease's Lost channel (the nested hold's
// too) and stops instead of renewing a lock it lost.
func TestStopsWhenLeaseLost(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	obs := &counts{}
	l := locktest.Poll(watchdog.New(rdb, reentrant.Options{Key: "lock", TTL: 90 * time.Millisecond}, quiet, obs))
	if err := rdb.Ping(ctx).Err(); err != nil {
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
	if lease.IsLost(outer) {
		t.Fatal("lost before anything happened")
	}
	if err := rdb.Del(ctx, "lock").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-outer.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("Lost was not closed within 5s of the lease vanishing")
	}
	if !lease.IsLost(inner) || obs.lost.Load() != 1 {
		t.Fatalf("nested hold lost %v, observer counted %d lost; want true and 1", lease.IsLost(inner), obs.lost.Load())
	}
	locktest.WaitFor(t, 5*time.Second, "the watchdog to stop once the lease is lost", func() bool { return dogs() == 0 })
	goroutinesBack(t, base, "the goroutine count to return to where it was")
	if rdb.Exists(ctx, "lock").Val() != 0 {
		t.Fatal("the watchdog recreated a lost lock")
	}
	if err := errors.Join(inner.Release(ctx), outer.Release(ctx)); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("release of a lost lock: err = %v, want lease.ErrNotHeld", err)
	}
}

// With its node gone, renewals fail; once they have failed for longer than
// the lease, the lock is certainly gone there too, and Lost is closed.
func TestLostWhenRenewalsFailPastTheLease(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	const ttl = 150 * time.Millisecond
	l, err := locktest.Poll(watchdog.New(rdb, reentrant.Options{Key: "lock", TTL: ttl}, quiet, nil)).Acquire(ctx, "owner")
	if err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	srv.Stop()
	select {
	case <-l.Lost():
		if since := time.Since(down); since < ttl/3 {
			t.Fatalf("Lost after %s, before any renewal could have failed", since)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Lost was not closed within 10s of the node going down")
	}
	locktest.WaitFor(t, 5*time.Second, "the watchdog to stop", func() bool { return dogs() == 0 })
	if err := l.Release(ctx); err == nil || errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("release with the node down: err = %v, want the connection error (not ErrNotHeld)", err)
	}
}

func TestFencingTokensGrow(t *testing.T) {
	rdb := redistest.Start(t).Client()
	locktest.Tokens(t, locktest.Poll(watchdog.New(rdb, reentrant.Options{Key: "lock", TTL: time.Second, Fence: true}, quiet, nil)))
}

// Includes starting and stopping the watchdog goroutine.
func BenchmarkAcquireRelease(b *testing.B) {
	rdb := redistest.Start(b).Client()
	locktest.BenchAcquireRelease(b, locktest.Poll(watchdog.New(rdb, reentrant.Options{Key: "bench", TTL: 20 * time.Second}, quiet, nil)))
}

func TestOneAttempt(t *testing.T) {
	locktest.OneAttempt(t, watchdog.New(redistest.Start(t).Client(), reentrant.Options{}, nil, nil))
}

// failing is a Redis client whose scripts all fail once fail is set: the
// renewals of a lock taken before.
type failing struct {
	redis.Scripter
	fail atomic.Bool
}

var errDown = errors.New("test: renewal refused")

func (f *failing) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	if f.fail.Load() {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(errDown)
		return cmd
	}
	return f.Scripter.EvalSha(ctx, sha1, keys, args...)
}

func (f *failing) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	if f.fail.Load() {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(errDown)
		return cmd
	}
	return f.Scripter.Eval(ctx, script, keys, args...)
}

// Renewals fail from the moment the lock is taken: by the time the key
// expires on Redis (its PEXPIRETIME, on the same machine's clock) the lease
// says it is lost (IsLost, the check before the write: by the clock, counted
// from when the acquire was sent), and Lost has closed by a timer, not at the
// next renewal tick after the lease ran out (a third of the lease later).
// Lost's own moment is a timer's, so it is held to a tenth of the lease: on
// a busy machine (go test -race, other tests running) a timer and the
// goroutine waiting on it ran up to 14 ms late, past the 12 ms the deadline
// keeps before the key's expiry. 100 locks at once, each its own key: every
// one of them.
func TestLostBeforeTheKeyExpires(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	const ttl = time.Second
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			key := fmt.Sprint("expiry-", i)
			f := &failing{Scripter: rdb}
			sent := time.Now()
			l, err := watchdog.New(f, reentrant.Options{Key: key, TTL: ttl}, quiet, nil).TryAcquire(ctx, "owner")
			if err != nil {
				t.Error(err)
				return
			}
			f.fail.Store(true)
			expires, err := rdb.PExpireTime(ctx, key).Result()
			if err != nil || expires <= 0 {
				t.Errorf("%s: PEXPIRETIME %v, %v", key, expires, err)
				return
			}
			expiry := time.UnixMilli(expires.Milliseconds())
			// Looked at 5 ms before the expiry: the deadline keeps 12 ms
			// (lease.Drift), so a lease counted a few ms too long is seen
			// unless this goroutine wakes over 5 ms late.
			time.Sleep(time.Until(expiry.Add(-5 * time.Millisecond)))
			if !lease.IsLost(l) {
				t.Errorf("%s: IsLost false at %s, 5 ms before the key's expiry on Redis", key, time.Now().Format(time.StampMicro))
			}
			select {
			case <-l.Lost():
			case <-time.After(10 * ttl):
				t.Errorf("%s: Lost still open %s after the acquire", key, 10*ttl)
				return
			}
			lost := time.Now()
			if late := lost.Sub(expiry); late > ttl/10 {
				t.Errorf("%s: Lost closed at %s, %s after the key expired on Redis", key, lost.Format(time.StampMicro), late)
			}
			if held := lost.Sub(sent); held < ttl/2 {
				t.Errorf("%s: Lost after %s of a %s lease", key, held, ttl)
			}
			f.fail.Store(false)
			_ = l.Release(ctx)
		})
	}
	wg.Wait()
}
