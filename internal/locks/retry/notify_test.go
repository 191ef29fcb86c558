package retry_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/locks/retry"
	setnx "github.com/locklab/locklab/internal/locks/v3_setnx"
	lua "github.com/locklab/locklab/internal/locks/v6_lua"
	reentrant "github.com/locklab/locklab/internal/locks/v7_reentrant"
	watchdog "github.com/locklab/locklab/internal/locks/v8_watchdog"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// notifier is one process's Notifier on key: two of them on one key are two
// replicas. The backstop is long, so a test that passes was woken by a message.
func notifier(t *testing.T, rdb *redis.Client, key string, backstop time.Duration) *retry.Notifier {
	t.Helper()
	n := retry.NewNotifier(context.Background(), rdb, key, backstop, claim, slog.New(slog.DiscardHandler))
	t.Cleanup(n.Close)
	return n
}

func TestNotifyExcludesAcrossProcesses(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	for name, g := range map[string]retry.Guard{
		"v4": setnx.New(rdb, setnx.Options{Key: "v4", TTL: 20 * time.Second}),
		"v6": lua.New(rdb, lua.Options{Key: "v6", TTL: 20 * time.Second}),
		"v7": reentrant.New(rdb, reentrant.Options{Key: "v7", TTL: 20 * time.Second}),
	} {
		t.Run(name, func(t *testing.T) {
			// The backstop is a minute: only the release's wake-up can
			// move a waiter.
			locktest.Exclusion(t, rdb, retry.Notify(g, notifier(t, rdb, name, time.Minute), nil),
				retry.Notify(g, notifier(t, rdb, name, time.Minute), nil))
		})
	}
}

// Waiters queued through two processes are served in arrival order.
func TestNotifyServesInArrivalOrder(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	procs := []*retry.Notified{}
	for range 2 {
		procs = append(procs, retry.Notify(setnx.New(rdb, setnx.Options{Key: "lock", TTL: 20 * time.Second}),
			notifier(t, rdb, "lock", time.Minute), nil))
	}
	held, err := procs[0].Acquire(ctx, "holder")
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 6
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range waiters {
		wg.Go(func() {
			l, err := procs[i%2].Acquire(ctx, fmt.Sprint("waiter-", i))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if err := l.Release(ctx); err != nil {
				t.Error(err)
			}
		})
		// The next waiter arrives only once this one is in the queue.
		locktest.WaitFor(t, 5*time.Second, "waiter in the queue", func() bool {
			return rdb.ZCard(ctx, "lock:queue").Val() == int64(i+2) // the holder is in it too
		})
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("served in order %v, want 0..%d", order, waiters-1)
		}
	}
	if n := rdb.Exists(ctx, "lock:queue").Val(); n != 0 {
		t.Fatalf("the queue is left behind with %d members", rdb.ZCard(ctx, "lock:queue").Val())
	}
}

// A holder that never releases (crashed) wakes nobody: the waiter gets the
// lock by its backstop once the lease and the holder's queue entry are gone.
func TestNotifyBackstopAfterCrashedHolder(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	crashed := retry.Notify(setnx.New(rdb, setnx.Options{Key: "lock", TTL: 300 * time.Millisecond}),
		notifier(t, rdb, "lock", time.Minute), nil)
	actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond) // its queue entry's deadline
	defer cancel()
	if _, err := crashed.Acquire(actx, "crashed"); err != nil {
		t.Fatal(err)
	}
	waiter := retry.Notify(setnx.New(rdb, setnx.Options{Key: "lock", TTL: 20 * time.Second}),
		notifier(t, rdb, "lock", 50*time.Millisecond), nil)
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	l, err := waiter.Acquire(wctx, "waiter")
	if err != nil {
		t.Fatalf("the waiter never got the crashed holder's lock: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A nested acquisition of a reentrant lock does not queue behind the waiters
// who wait for the lock its owner already holds.
func TestNotifyNestedSkipsTheQueue(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	n := notifier(t, rdb, "lock", time.Minute)
	g := retry.Notify(reentrant.New(rdb, reentrant.Options{Key: "lock", TTL: 20 * time.Second}), n, nil)
	outer, err := g.Acquire(ctx, "owner")
	if err != nil {
		t.Fatal(err)
	}
	done := takeAndGive(ctx, g, "other")
	locktest.WaitFor(t, 5*time.Second, "the other owner queued", func() bool { return rdb.ZCard(ctx, "lock:queue").Val() == 2 })
	nctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	inner, err := g.Acquire(nctx, "owner")
	if err != nil {
		t.Fatalf("nested acquisition: %v", err)
	}
	if err := inner.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the other owner: %v", err)
	}
}

// A waiter that gives up leaves the queue, and the one behind it is served.
func TestNotifyGiveUpLeavesTheQueue(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	var attempts int
	g := retry.Notify(setnx.New(rdb, setnx.Options{Key: "lock", TTL: 20 * time.Second}), notifier(t, rdb, "lock", time.Minute),
		func(n int) { attempts = n })
	held, err := g.Acquire(ctx, "holder")
	if err != nil {
		t.Fatal(err)
	}
	gctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := g.Acquire(gctx, "impatient"); err == nil {
		t.Fatal("obtained a held lock")
	}
	if attempts != 1 {
		t.Fatalf("%d attempts in 100 ms with no release, want 1: waiters must not poll", attempts)
	}
	if _, err := rdb.ZScore(ctx, "lock:queue", "impatient").Result(); err != redis.Nil {
		t.Fatalf("the waiter that gave up is still queued (err %v)", err)
	}
	done := takeAndGive(ctx, g, "patient")
	locktest.WaitFor(t, 5*time.Second, "the patient waiter queued", func() bool { return rdb.ZCard(ctx, "lock:queue").Val() == 2 })
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// takeAndGive acquires g for owner in the background and releases it at once;
// the channel gets the outcome.
func takeAndGive(ctx context.Context, g locktest.Locker, owner string) <-chan error {
	done := make(chan error, 1)
	go func() {
		l, err := g.Acquire(ctx, owner)
		if err == nil {
			err = l.Release(ctx)
		}
		done <- err
	}()
	return done
}

// A waiter that died while queued (its replica killed) is woken by the
// release and never tries. After its claim deadline the releasing process
// checks, drops it, and wakes the live waiter behind it: the queue moves on
// after one claim deadline, not the dead waiter's own wait deadline (5 s
// here; the queue is in deadline order, so the live waiter, with 10 s,
// queues behind it). The live waiter's backstop is a minute, so only that
// wake-up can serve it.
func TestNotifyDeadWaiter(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	const ttl = 20 * time.Second
	for name, g := range map[string]retry.Guard{
		"v3": setnx.New(rdb, setnx.Options{Key: "dead-v3"}),
		"v6": lua.New(rdb, lua.Options{Key: "dead-v6", TTL: ttl}),
		"v8": watchdog.New(rdb, reentrant.Options{Key: "dead-v8", TTL: ttl}, nil, nil),
	} {
		t.Run(name, func(t *testing.T) {
			key := "dead-" + name
			holderProc := retry.Notify(g, notifier(t, rdb, key, time.Minute), nil)
			held, err := holderProc.Acquire(ctx, "holder")
			if err != nil {
				t.Fatal(err)
			}
			// The dead waiter: queued, as enqueue.lua queues, by a process
			// that is gone (its deadline 5 s away on Redis's clock).
			now, err := rdb.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			if err := rdb.ZAdd(ctx, key+":queue", redis.Z{Score: float64(now.Add(5 * time.Second).UnixMilli()), Member: "dead"}).Err(); err != nil {
				t.Fatal(err)
			}
			live := retry.Notify(g, notifier(t, rdb, key, time.Minute), nil)
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			got := make(chan error, 1)
			go func() {
				l, err := live.Acquire(wctx, "alive")
				if err == nil {
					err = l.Release(ctx)
				}
				got <- err
			}()
			locktest.WaitFor(t, 5*time.Second, "the live waiter queued", func() bool { return rdb.ZCard(ctx, key+":queue").Val() == 3 })
			released := time.Now()
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("the live waiter behind the dead one: %v", err)
			}
			waited := time.Since(released)
			if waited < claim || waited > 2500*time.Millisecond {
				t.Fatalf("the live waiter was served %s after the release, want after the dead waiter's claim deadline (%s) and long before its own deadline (5 s)", waited, claim)
			}
			if n := rdb.Exists(ctx, key+":queue", key+":queue:woken").Val(); n != 0 {
				t.Fatalf("queue %v, woken %v left behind", rdb.ZRange(ctx, key+":queue", 0, -1).Val(), rdb.HGetAll(ctx, key+":queue:woken").Val())
			}
			if n, err := rdb.Get(ctx, retry.PassedKey(key)).Int(); err != nil || n != 1 {
				t.Fatalf("passes counter %d (%v), want 1: the releasing process's check dropped the dead waiter", n, err)
			}
			t.Logf("%s: served %s after the release (claim deadline %s)", name, waited.Round(time.Millisecond), claim)
		})
	}
}
