package retry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/fence"
	"github.com/locklab/locklab/internal/locks/handoff"
	"github.com/locklab/locklab/internal/locks/retry"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// With -chaos each sale says whether it is fenced (fence=1|0), so a fenced
// and an unfenced sale can share one lock and its hand-off queue. Who is
// handed the lock gets what it asked for: a fenced waiter a new token, an
// unfenced one none, whatever the releaser asked for. Every version with a
// hand-over script (the string lock's v3 to v6, the hash's v7 and v8), in
// both orders.
func TestHandoffFenceTravelsWithTheWaiter(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	eachMixed(t, rdb, "mixed", func(t *testing.T, key string, fenced bool, waiting retry.Queuer, holder lease.Lease) {
		// Tokens issued before: the waiter's must be newer, or none.
		const issued = 41
		if err := rdb.Set(ctx, fence.CounterKey(key), issued, 0).Err(); err != nil {
			t.Fatal(err)
		}
		type acquired struct {
			l   lease.Lease
			err error
		}
		got := make(chan acquired, 1)
		w := handedOff(t, rdb, key, waiting, nil)
		go func() {
			l, err := w.Acquire(ctx, "waiter")
			got <- acquired{l, err}
		}()
		waitQueued(t, rdb, key, 1)
		release(t, holder)
		a := <-got
		if a.err != nil {
			t.Fatal(a.err)
		}
		counter := counterOf(t, rdb, key)
		switch {
		case fenced && (a.l.Token() <= issued || a.l.Token() != counter):
			t.Fatalf("fenced waiter handed the lock by an unfenced releaser: token %d, counter %d; want a new token above %d",
				a.l.Token(), counter, issued)
		case !fenced && (a.l.Token() != 0 || counter != issued):
			t.Fatalf("unfenced waiter handed the lock by a fenced releaser: token %d, counter %d; want none, the counter left at %d",
				a.l.Token(), counter, issued)
		}
		release(t, a.l)
		noneLeft(t, rdb, key)
	})
}

// The re-claim path (a waiter's check finds the lock already handed to it,
// the grant's message lost) answers as the attempt would: a fenced waiter
// gets a token, newer than every one before, even when its releaser was
// unfenced and no token had ever been issued on the lock; never a nil reply.
func TestHandoffReclaimMixed(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	eachMixed(t, rdb, "reclaim", func(t *testing.T, key string, fenced bool, waiting retry.Queuer, holder lease.Lease) {
		if _, err := waiting.TryOrQueue(ctx, "waiter", waiter(time.Minute, false)); !errors.Is(err, lease.ErrTaken) {
			t.Fatalf("waiter: %v, want queued", err)
		}
		release(t, holder)
		assertHolder(t, rdb, key, "waiter")
		l, err := waiting.TryOrQueue(ctx, "waiter", waiter(time.Minute, true))
		if err != nil {
			t.Fatalf("the re-claim of a lock handed over: %v, want the lease", err)
		}
		if counter := counterOf(t, rdb, key); (fenced && (l.Token() <= 0 || l.Token() != counter)) || (!fenced && l.Token() != 0) {
			t.Fatalf("fenced=%t: the re-claim's token %d, counter %d; want the newest token when fenced, none otherwise", fenced, l.Token(), counter)
		}
		release(t, l)
		noneLeft(t, rdb, key)
	})
}

// eachMixed runs run for v3 to v8, each in both orders, on a key of its
// own: the version built twice on it, as two sales' variants, one holding
// the lock (holder, the releaser), the other (waiting) fenced when the
// releaser is not, and the other way round.
func eachMixed(t *testing.T, rdb *redis.Client, prefix string,
	run func(t *testing.T, key string, waiterFenced bool, waiting retry.Queuer, holder lease.Lease)) {
	for name := range queuers(rdb, "", 0, false) {
		for _, fenced := range []bool{true, false} {
			order := map[bool]string{true: " unfenced releaser, fenced waiter", false: " fenced releaser, unfenced waiter"}[fenced]
			t.Run(name+order, func(t *testing.T) {
				key := fmt.Sprint(prefix, "-", name, "-", fenced)
				releaser := queuers(rdb, key, 20*time.Second, !fenced)[name]
				holder, err := releaser.TryOrQueue(context.Background(), "holder", waiter(time.Minute, false))
				if err != nil {
					t.Fatal(err)
				}
				run(t, key, fenced, queuers(rdb, key, 20*time.Second, fenced)[name], holder)
			})
		}
	}
}

// waitQueued waits until n owners are in key's hand-off queue.
func waitQueued(t *testing.T, rdb *redis.Client, key string, n int64) {
	t.Helper()
	locktest.WaitFor(t, 5*time.Second, "the waiter in the queue", func() bool { return rdb.ZCard(context.Background(), handoff.For(key).Queue).Val() == n })
}

// counterOf is key's fencing counter (0 when none was issued).
func counterOf(t *testing.T, rdb *redis.Client, key string) int64 {
	t.Helper()
	n, err := rdb.Get(context.Background(), fence.CounterKey(key)).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return n
}

// noneLeft fails if the lock or its queue's keys are left behind.
func noneLeft(t *testing.T, rdb *redis.Client, key string) {
	t.Helper()
	k := handoff.For(key)
	if n := rdb.Exists(context.Background(), k.Lock, k.Queue, k.Deadlines, k.Granted).Val(); n != 0 {
		t.Fatalf("%d of the lock and its queue's keys left behind", n)
	}
}
