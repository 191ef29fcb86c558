package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/fence"
	"github.com/locklab/locklab/internal/locks/redlock"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redisconn"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/internal/sale"
	"github.com/redis/go-redis/v9"
)

// cluster starts three independent redis-servers.
func cluster(tb testing.TB) [3]*redistest.Server {
	return [3]*redistest.Server{redistest.Start(tb), redistest.Start(tb), redistest.Start(tb)}
}

// guard builds a Locker with its own clients, as one replica would.
func guard(nodes [3]*redistest.Server, o redlock.Options) *redlock.Locker {
	clients := make([]redis.UniversalClient, len(nodes))
	for i, n := range nodes {
		clients[i] = n.Client()
	}
	o.Key = "lock"
	return redlock.New(clients, o)
}

// locker is guard waiting as the tests do.
func locker(nodes [3]*redistest.Server, ttl time.Duration) locktest.Locker {
	return locktest.Poll(guard(nodes, redlock.Options{TTL: ttl}))
}

func TestExcludesAcrossInstances(t *testing.T) {
	nodes := cluster(t)
	locktest.Exclusion(t, nodes[0].Client(), locker(nodes, 10*time.Second), locker(nodes, 10*time.Second))
}

func TestOneNodeDown(t *testing.T) {
	nodes := cluster(t)
	nodes[1].Stop()
	l := locker(nodes, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a, err := l.Acquire(ctx, "A")
	if err != nil {
		t.Fatalf("with one of three nodes down: %v", err)
	}
	// Still exclusive on the remaining majority.
	locktest.Waits(t, l, "B")
	if err := a.Release(ctx); err != nil {
		t.Fatalf("release with one node down: %v", err)
	}
	if _, err := l.Acquire(ctx, "B"); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

// A node that takes commands and answers none (frozen; a stopped
// container's old address does the same) costs one read timeout, not one per
// attempt: after a command to it timed out, the service's node clients
// (redisconn.NewNode) refuse its commands at once until it answers a PING,
// and the other two grant the lock meanwhile. Counted on the client: of 10
// acquisitions' commands to the frozen node, at most 2 were sent and timed
// out, the rest refused unsent (without the breaker all 10 timed out: seen
// failing so), whether the client had a connection to it before it froze or
// dials it after. Then it is used again: an acquisition holds all three.
func TestNodeNotAnsweringIsHeldOff(t *testing.T) {
	for _, warm := range []bool{true, false} {
		t.Run(fmt.Sprintf("pooled connection %t", warm), func(t *testing.T) { nodeHeldOff(t, warm) })
	}
}

// nodeHeldOff is TestNodeNotAnsweringIsHeldOff with the frozen node's
// connection made before it froze (warm) or after (its port still accepts).
func nodeHeldOff(t *testing.T, warm bool) {
	nodes := cluster(t)
	clients := make([]redis.UniversalClient, len(nodes))
	for i, n := range nodes {
		c := redisconn.NewNode(n.Addr, "")
		t.Cleanup(func() { c.Close() })
		clients[i] = c
	}
	var unanswered atomic.Int64
	clients[2].AddHook(countTimeouts{&unanswered})
	l := locktest.Poll(redlock.New(clients, redlock.Options{Key: "lock", TTL: 2 * time.Second}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sell := func(owner string) {
		t.Helper()
		a, err := l.Acquire(ctx, owner)
		if err != nil {
			t.Fatalf("%s: %v", owner, err)
		}
		if err := a.Release(ctx); err != nil {
			t.Fatalf("%s's release: %v", owner, err)
		}
	}
	if warm {
		sell("warm") // a connection to each node in the pool
	}
	nodes[2].Freeze(true)
	for i := range 10 {
		sell(fmt.Sprintf("A%d", i))
	}
	nodes[2].Freeze(false)
	if got := unanswered.Load(); got > 2 {
		t.Errorf("10 acquisitions sent %d commands to the node that did not answer, each waiting out its timeout; want at most 2", got)
	}
	watch := nodes[2].Client()
	for i := 0; ; i++ {
		a, err := l.Acquire(ctx, fmt.Sprintf("B%d", i))
		if err != nil {
			t.Fatal(err)
		}
		on2 := watch.Get(ctx, "lock").Val() == fmt.Sprintf("B%d", i)
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if on2 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the node that answers again was never used again")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// countTimeouts counts the commands that were sent and timed out.
type countTimeouts struct{ n *atomic.Int64 }

func (h countTimeouts) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countTimeouts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h countTimeouts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			h.n.Add(1)
		}
		return err
	}
}

// With two of three down no majority is possible: a clear error at once, not a
// wait until the deadline.
func TestTwoNodesDown(t *testing.T) {
	nodes := cluster(t)
	nodes[0].Stop()
	nodes[2].Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := locker(nodes, 10*time.Second).Acquire(ctx, "A")
	if !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("err = %v, want ErrNoQuorum", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the acquisition waited until its deadline instead of failing at once")
	}
}

func TestLateReleaseReportsLostLock(t *testing.T) {
	nodes := cluster(t)
	// redsync gives each node 5% of the lease to answer: a 60 ms lease left
	// 3 ms, which a busy 2-core machine missed (the acquire then failed). 600 ms
	// leaves 30 ms, and the test still waits only on the keys' expiry.
	l := locker(nodes, 600*time.Millisecond)
	ctx := context.Background()
	a, err := l.Acquire(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	clients := []*redis.Client{nodes[0].Client(), nodes[1].Client(), nodes[2].Client()}
	locktest.WaitFor(t, 5*time.Second, "the lease to expire on every node", func() bool {
		for _, c := range clients {
			if c.Exists(ctx, "lock").Val() != 0 {
				return false
			}
		}
		return true
	})
	if err := a.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("late release: err = %v, want ErrNotHeld", err)
	}
}

// Tokens grow, also with one node down; with two down there is no token.
func TestFencingTokens(t *testing.T) {
	nodes := cluster(t)
	l := locktest.Poll(guard(nodes, redlock.Options{TTL: 10 * time.Second, Fence: true}))
	locktest.Tokens(t, l)
	nodes[2].Stop()
	locktest.Tokens(t, l)
}

// Three nodes, fanned out in parallel by redsync.
func BenchmarkAcquireRelease(b *testing.B) {
	locktest.BenchAcquireRelease(b, locker(cluster(b), 20*time.Second))
}

func TestOneAttempt(t *testing.T) {
	locktest.OneAttempt(t, guard(cluster(t), redlock.Options{}))
}

// A redlock token is the highest of one counter per node over a majority,
// and the nodes of that majority that were behind are raised to it: the
// highest can no longer sit on a node the next holder's majority misses.
// Node counters 5, 4 and none; the first holder's majority (nodes 0 and 1)
// INCRs them to 6 and 5 and raises node 1 to 6; the second's (nodes 1 and 2,
// node 0 down) reaches 7 on node 1. Without the write-back node 1 stayed at
// 5, and the second holder got 6 again.
func TestFencingTokenWrittenBack(t *testing.T) {
	nodes := cluster(t)
	ctx := context.Background()
	counter := fence.CounterKey("lock")
	for i, n := range []int64{5, 4} { // node 0 ahead of node 1; node 2 has none
		if err := nodes[i].Client().Set(ctx, counter, n, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	g := guard(nodes, redlock.Options{TTL: 10 * time.Second, Fence: true})
	nodes[2].Stop()
	first, err := g.TryAcquire(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := counters(t, nodes[:2]); first.Token() != 6 || got[0] != 6 || got[1] != 6 {
		t.Fatalf("token %d, counters %v after it; want 6, and 6 on both nodes of its majority", first.Token(), got)
	}
	nodes[2].Restart()
	nodes[0].Stop()
	second, err := g.TryAcquire(ctx, "second")
	if err != nil {
		t.Fatal(err)
	}
	defer second.Release(ctx)
	if second.Token() != 7 {
		t.Fatalf("tokens %d then %d; want 6 then 7", first.Token(), second.Token())
	}
	if got := counters(t, nodes[1:]); got[0] != 7 || got[1] != 7 {
		t.Fatalf("counters %v on the second majority, want 7 on both (node 2 raised from 1)", got)
	}
}

// counters reads the fencing counter of "lock" on each node (0 when unset).
func counters(t *testing.T, nodes []*redistest.Server) []int64 {
	t.Helper()
	var got []int64
	for _, n := range nodes {
		v, err := n.Client().Get(context.Background(), fence.CounterKey("lock")).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	return got
}

// A rolling outage: node A down while sales run, then back (empty, restarted
// without persistence) with B down, then B back with C down. Every fenced
// sale sells, each with a larger token than the one before. With the token
// only the highest of the INCRs, the third phase's majority (A and B) had
// both missed the sales of the second (A) or of the first two (B): their
// INCRs fell below the newest token the stock had seen, and every fenced
// sale was refused (412 fenced) until the counters caught up.
func TestFencedSalesThroughRollingOutage(t *testing.T) {
	nodes := cluster(t)
	stock := redistest.Start(t).Client()
	ctx := context.Background()
	if err := stock.Set(ctx, api.DefaultStockKey, 100, 0).Err(); err != nil {
		t.Fatal(err)
	}
	svc := sale.New(stock, sale.Options{AcquireTimeout: 5 * time.Second})
	m := sale.Method{Name: "redlock", Lock: locktest.Poll(guard(nodes, redlock.Options{TTL: 10 * time.Second, Fence: true})), Fence: "redlock"}
	var last int64
	sell := func(phase string) {
		t.Helper()
		for range 3 {
			res, err := svc.Sell(ctx, m)
			if err != nil {
				t.Fatalf("%s: sale after token %d: %v", phase, last, err)
			}
			if res.Trace.Token <= last {
				t.Fatalf("%s: token %d after %d", phase, res.Trace.Token, last)
			}
			last = res.Trace.Token
		}
	}
	nodes[0].Stop()
	sell("A down")
	nodes[0].Restart()
	nodes[1].Stop()
	sell("A back, B down")
	nodes[1].Restart()
	nodes[2].Stop()
	sell("B back, C down")
	if n, err := stock.Get(ctx, api.DefaultStockKey).Int64(); err != nil || n != 91 {
		t.Fatalf("stock %d (err %v), want 91 after 9 sales", n, err)
	}
}

// A request's lease (the lease= fault hook) replaces the Locker's on every
// node, for that acquisition only.
func TestLeasePerRequest(t *testing.T) {
	nodes := cluster(t)
	g := guard(nodes, redlock.Options{TTL: time.Second})
	ctx := context.Background()
	for _, c := range []struct {
		ctx      context.Context
		min, max time.Duration
	}{
		{chaos.With(ctx, chaos.Faults{Lease: time.Minute}), 50 * time.Second, time.Minute},
		{ctx, 0, time.Second},
	} {
		l, err := g.TryAcquire(c.ctx, "A")
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range nodes {
			if ttl := n.Client().PTTL(ctx, "lock").Val(); ttl <= c.min || ttl > c.max {
				t.Errorf("node %d: PTTL %s, want in (%s, %s]", i, ttl, c.min, c.max)
			}
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// Nothing renews a Redlock: its validity ends before the key expires on any
// node of the majority that granted it (their PEXPIRETIME, on the same
// machine's clock): IsLost by then, and Lost closed by its timer, in each of
// 12 locks, three at a time. (redsync gives each node a twentieth of the lease to answer: 50
// locks at once under the race detector on a busy CI machine missed it, and
// the test is of the validity, not of the nodes' speed.)
func TestLostBeforeTheKeysExpire(t *testing.T) {
	nodes := cluster(t)
	clients := make([]redis.UniversalClient, len(nodes))
	for i, n := range nodes {
		clients[i] = n.Client()
	}
	ctx := context.Background()
	const ttl = 2 * time.Second
	var wg sync.WaitGroup
	slots := make(chan struct{}, 3)
	for i := range 12 {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			key := fmt.Sprint("validity-", i)
			l, err := redlock.New(clients, redlock.Options{Key: key, TTL: ttl}).TryAcquire(ctx, "owner")
			if err != nil {
				t.Error(err)
				return
			}
			var first time.Time
			for _, c := range clients {
				ms, err := c.PExpireTime(ctx, key).Result()
				if err != nil {
					t.Error(err)
					return
				}
				if at := time.UnixMilli(ms.Milliseconds()); ms > 0 && (first.IsZero() || at.Before(first)) {
					first = at
				}
			}
			// The check before the write, IsLost, goes by the clock: lost
			// before the first node's expiry. Lost's own moment is a timer's, held
			// to a tenth of the lease (on a busy machine a timer and its
			// goroutine ran late, once past the 22 ms the validity keeps).
			time.Sleep(time.Until(first.Add(-10 * time.Millisecond))) // the validity keeps 22 ms
			if !lease.IsLost(l) {
				t.Errorf("%s: IsLost false 10 ms before the first node's expiry", key)
			}
			select {
			case <-l.Lost():
			case <-time.After(10 * ttl):
				t.Errorf("%s: Lost still open %s after the acquire", key, 10*ttl)
				return
			}
			if late := time.Since(first); late > ttl/10 {
				t.Errorf("%s: Lost closed %s after the key expired on a node", key, late)
			}
		})
	}
	wg.Wait()
}
