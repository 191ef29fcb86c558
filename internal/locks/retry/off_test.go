package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/handoff"
	"github.com/locklab/locklab/internal/locks/retry"
	lua "github.com/locklab/locklab/internal/locks/v6_lua"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The waiting's fixes switched off (the off= hook, make mutations) let their
// flaw through where the fix stops it, and leave a trace the cells read.

// off is a context carrying o, as a sale's request with off= does.
func off(o chaos.Off) context.Context {
	return chaos.With(context.Background(), chaos.Faults{Off: o})
}

// The claim check switched off: a release hands the lock to a dead waiter
// (handoff) or wakes it (notify), and nothing of the releasing process's
// passes it on at the claim deadline; the live waiter behind it is served
// only by its own periodic check (backstop 300 ms here), and the passes
// counter dead-waiter reads stays 0 (with the check on it is 1:
// TestHandoffDeadWaiter, TestNotifyDeadWaiter).
func TestClaimSwitchedOff(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	const backstop = 300 * time.Millisecond
	for _, wait := range []string{"handoff", "notify"} {
		t.Run(wait, func(t *testing.T) {
			key := "claim-off-" + wait
			g := lua.New(rdb, lua.Options{Key: key, TTL: 20 * time.Second, Handoff: wait == "handoff", Claim: claim})
			waiting := func(n *retry.Notifier) locktest.Locker {
				if wait == "handoff" {
					return retry.Handoff(g, n, nil)
				}
				return retry.Notify(g, n, nil)
			}
			held, err := waiting(notifier(t, rdb, key, time.Minute)).Acquire(ctx, "holder")
			if err != nil {
				t.Fatal(err)
			}
			queue, passed := key+":queue", retry.PassedKey(key)
			if wait == "handoff" {
				queue, passed = handoff.For(key).Queue, handoff.For(key).Passed
				// The dead waiter: queued by a process that is gone.
				if _, err := g.TryOrQueue(ctx, "dead", waiter(time.Minute, false)); !errors.Is(err, lease.ErrTaken) {
					t.Fatalf("the waiter that dies: %v, want queued", err)
				}
			} else {
				now, err := rdb.Time(ctx).Result()
				if err != nil {
					t.Fatal(err)
				}
				if err := rdb.ZAdd(ctx, queue, redis.Z{Score: float64(now.Add(5 * time.Second).UnixMilli()), Member: "dead"}).Err(); err != nil {
					t.Fatal(err)
				}
			}
			before := rdb.ZCard(ctx, queue).Val()
			live := waiting(notifier(t, rdb, key, backstop))
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			got := takeAndGive(wctx, live, "alive")
			locktest.WaitFor(t, 5*time.Second, "the live waiter queued", func() bool { return rdb.ZCard(ctx, queue).Val() == before+1 })
			if err := held.Release(off(chaos.Off{Claim: true})); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("the live waiter behind the dead one, by its own check: %v", err)
			}
			if n, err := rdb.Get(ctx, passed).Int(); !errors.Is(err, redis.Nil) || n != 0 {
				t.Fatalf("passes counter %d (%v) with the claim check off, want none: nothing of the releaser's passed the lock on", n, err)
			}
		})
	}
}

// The wake-up switched off: a release frees the lock and neither hands it to
// the waiter queued (handoff: no grant, the waiter still queued) nor wakes
// it (notify: nobody woken); with it on, the waiter holds the lock
// (handoff) or is woken (notify).
func TestWakeSwitchedOff(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	for _, on := range []bool{false, true} {
		release := ctx
		if !on {
			release = off(chaos.Off{Wake: true})
		}
		for name, g := range queuers(rdb, "wake-handoff", 20*time.Second, false) {
			if name != "v3" && name != "v6" && name != "v8" { // the three kinds of release
				continue
			}
			k := handoff.For("wake-handoff")
			holder, err := g.TryOrQueue(ctx, "holder", waiter(time.Minute, false))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := g.TryOrQueue(ctx, "next", waiter(time.Minute, false)); !errors.Is(err, lease.ErrTaken) {
				t.Fatalf("%s: the waiter: %v, want queued", name, err)
			}
			if err := holder.Release(release); err != nil {
				t.Fatalf("%s, wake-up on %v: %v", name, on, err)
			}
			if on {
				assertHolder(t, rdb, k.Lock, "next")
			} else if n := rdb.Exists(ctx, k.Lock, k.Granted).Val(); n != 0 || rdb.ZScore(ctx, k.Queue, "next").Err() != nil {
				t.Fatalf("%s, wake-up off: lock or grant left (%d), queue %v; want the lock free and the waiter still queued", name, n, rdb.ZRange(ctx, k.Queue, 0, -1).Val())
			}
			if err := rdb.Del(ctx, k.Lock, k.Queue, k.Deadlines, k.Granted).Err(); err != nil {
				t.Fatal(err)
			}
		}
		// notify: the waiter queued as enqueue.lua queues it.
		key := "wake-notify"
		queue, woken := retry.QueueKeys(key)
		held, err := retry.Notify(lua.New(rdb, lua.Options{Key: key}), notifier(t, rdb, key, time.Minute), nil).Acquire(ctx, "holder")
		if err != nil {
			t.Fatal(err)
		}
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.ZAdd(ctx, queue, redis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: "next"}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := held.Release(release); err != nil {
			t.Fatal(err)
		}
		if got := rdb.HExists(ctx, woken, "next").Val(); got != on || rdb.Exists(ctx, key).Val() != 0 {
			t.Fatalf("notify, wake-up on %v: the waiter woken %v, lock %d; want woken %v and the lock free", on, got, rdb.Exists(ctx, key).Val(), on)
		}
		if err := rdb.Del(ctx, key, queue, woken).Err(); err != nil {
			t.Fatal(err)
		}
	}
}
