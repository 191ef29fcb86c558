package etcd_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/etcdtest"
	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/etcd"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Two clients, each its own Locker (two replicas), never hold the lock at
// once and lose no update; a third Locker's attempt while one holds is
// refused at once; fenced, every holder's token is larger.
func TestEtcdExcludesAcrossClients(t *testing.T) {
	c := etcdtest.Start(t, 3)
	rdb := redistest.Start(t).Client()
	a := etcd.New(c.Client(), etcd.Options{Key: "lock", TTL: 10 * time.Second})
	b := etcd.New(c.Client(), etcd.Options{Key: "lock", TTL: 10 * time.Second})
	locktest.Exclusion(t, rdb, a, b)
	locktest.OneAttempt(t, a)
	locktest.Tokens(t, etcd.New(c.Client(), etcd.Options{Key: "lock", TTL: 10 * time.Second, Fence: true}))
}

// The token is the holder's key's create revision: larger for a later
// holder across clients, and never 0 when fenced.
func TestEtcdTokenIsTheCreateRevision(t *testing.T) {
	ctx := context.Background()
	cli, g, held := holding(t, true)
	keys, err := cli.Get(ctx, g.Prefix(), clientv3.WithPrefix())
	if err != nil || len(keys.Kvs) != 1 {
		t.Fatalf("keys under the prefix: %v (err %v), want the holder's", keys.Kvs, err)
	}
	if got := keys.Kvs[0].CreateRevision; held.Token() != got {
		t.Fatalf("token %d, the holder's key was created at revision %d", held.Token(), got)
	}
	release(t, held)
	next, err := etcd.New(cli, etcd.Options{Key: "lock", TTL: 10 * time.Second, Fence: true}).Acquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if next.Token() <= held.Token() {
		t.Fatalf("the next holder's token %d is not larger than %d", next.Token(), held.Token())
	}
	release(t, next)
}

// With one member of three down the lock still works; with two down there is
// no quorum: an acquisition fails by its deadline, clearly, and takes nothing.
func TestEtcdMembersDown(t *testing.T) {
	c := etcdtest.Start(t, 3)
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	a := etcd.New(c.Client(), etcd.Options{Key: "lock", TTL: 10 * time.Second})
	b := etcd.New(c.Client(), etcd.Options{Key: "lock", TTL: 10 * time.Second})

	c.Members[0].Stop()
	c.WaitLeader(30 * time.Second)
	locktest.Exclusion(t, rdb, a, b)

	c.Members[1].Stop()
	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	l, err := a.Acquire(actx, "owner")
	if err == nil {
		release(t, l)
		t.Fatal("obtained the lock with two of three members down")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no quorum: err %v, want the deadline", err)
	}
	if waited := time.Since(start); waited > 4*time.Second {
		t.Fatalf("gave up after %s on a 2 s deadline", waited)
	}
}

// A hold whose lease ends under it (revoked here, as an expiry would) is
// lost: Lost closes, and the release says the lock was not held.
func TestEtcdLostLease(t *testing.T) {
	ctx := context.Background()
	cli, _, held := holding(t, false)
	leases, err := cli.Leases(ctx)
	if err != nil || len(leases.Leases) != 1 {
		t.Fatalf("leases %v (err %v), want the holder's", leases, err)
	}
	if _, err := cli.Revoke(ctx, leases.Leases[0].ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the lease was revoked and Lost never closed")
	}
	if err := held.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("release after the lease ended: %v, want lease.ErrNotHeld", err)
	}
}

// The mutex is not reentrant: a holder that asks again waits on itself until
// its deadline, and the waiting key it added is gone afterwards.
func TestEtcdNotReentrant(t *testing.T) {
	ctx := context.Background()
	cli, g, held := holding(t, false)
	locktest.Waits(t, g, "owner")
	keys, err := cli.Get(ctx, g.Prefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || keys.Count != 1 {
		t.Fatalf("%d keys under the prefix (err %v), want only the holder's", keys.Count, err)
	}
	release(t, held)
}

// holding starts a three-member cluster and takes the lock on it: the
// client, the Locker and the hold.
func holding(t *testing.T, fenced bool) (*clientv3.Client, *etcd.Locker, lease.Lease) {
	t.Helper()
	cli := etcdtest.Start(t, 3).Client()
	g := etcd.New(cli, etcd.Options{Key: "lock", TTL: 10 * time.Second, Fence: fenced})
	held, err := g.Acquire(context.Background(), "owner")
	if err != nil {
		t.Fatal(err)
	}
	return cli, g, held
}

func release(t *testing.T, l lease.Lease) {
	t.Helper()
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkAcquireRelease is one uncontended hold: lease, key, release,
// revoke (make bench-guards).
func BenchmarkAcquireRelease(b *testing.B) {
	g := etcd.New(etcdtest.Start(b, 3).Client(), etcd.Options{Key: "lock", TTL: 10 * time.Second})
	locktest.BenchAcquireRelease(b, g)
}

// A hold kept past its lease stays valid while keep-alives succeed (the
// holder's own move its deadline on); once the cluster has no quorum they
// fail, and Lost closes at the deadline counted from the last one that
// succeeded, by a timer, whatever the client's session believes.
func TestEtcdLostAtTheDeadline(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ctx := context.Background()
	held, err := etcd.New(c.Client(), etcd.Options{Key: "lock", TTL: time.Second}).Acquire(ctx, "owner")
	if err != nil {
		t.Fatal(err)
	}
	leases, err := c.Client().Leases(ctx)
	if err != nil || len(leases.Leases) != 1 {
		t.Fatalf("leases %v (err %v), want the holder's", leases, err)
	}
	ttl, err := c.Client().TimeToLive(ctx, leases.Leases[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	granted := time.Duration(ttl.GrantedTTL) * time.Second
	// Held for three leases: every keep-alive answered.
	for end := time.Now().Add(3 * granted); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if lease.IsLost(held) {
			t.Fatalf("lost while its keep-alives succeed (lease %s)", granted)
		}
	}
	c.Members[0].Stop()
	c.Members[1].Stop()
	cut := time.Now()
	select {
	case <-held.Lost():
	case <-time.After(10 * granted):
		t.Fatalf("no quorum for %s and Lost still open", 10*granted)
	}
	// A keep-alive is answered by the leader alone, without the quorum, so
	// the surviving member renews until it sees the quorum gone and steps
	// down (an election timeout, 500 ms here, and its check's period; one
	// measured run: 1.64 s after the cut with a 1 s lease). Lost closes
	// within a lease of the last renewal: at most two leases after the cut.
	if since := time.Since(cut); since > 2*granted {
		t.Fatalf("Lost closed %s after the quorum was gone, lease %s", since, granted)
	}
}

// A replica cut off from etcd between the lock and the read of its token
// (every member frozen just before the read is sent) answers within a
// bound, with etcd's failure (the sale's 503 unavailable: nothing sold), not
// with its acquire deadline or a wait of minutes; and the hold it took goes,
// released or with its lease: once etcd is back, the next holder gets the
// lock.
func TestEtcdCutBeforeTheToken(t *testing.T) {
	c := etcdtest.Start(t, 3)
	cli := c.Client()
	const prefix = "lock/"
	etcdtest.BeforeGet(cli, func(key string) bool { return strings.HasPrefix(key, prefix) && key != prefix }, func() { c.Freeze(true) })
	g := etcd.New(cli, etcd.Options{Key: "lock", TTL: time.Second, Fence: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		l, err := g.Acquire(ctx, "cut")
		if err == nil {
			err = errors.Join(errors.New("obtained"), l.Release(ctx))
		}
		done <- err
	}()
	// The token's read, then the lease's revocation, each under its bound.
	bound := etcd.RequestTimeout + 4*time.Second // slack for a busy machine
	var err error
	select {
	case err = <-done:
	case <-time.After(bound):
		c.Freeze(false)
		t.Fatalf("the acquisition cut off from etcd before its token still waits after %s", bound)
	}
	if err == nil || errors.Is(err, lease.ErrTaken) || ctx.Err() != nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("after %s: err %v (ctx %v), want etcd's failure to read the token", time.Since(start), err, ctx.Err())
	}
	c.Freeze(false)
	locktest.WaitFor(t, 30*time.Second, "the client back and the cut hold's key gone", func() bool {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		keys, err := cli.Get(rctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && keys.Count == 0
	})
	next, err := g.Acquire(ctx, "next")
	if err != nil {
		t.Fatal(err)
	}
	release(t, next)
}

// A waiter is woken by the watch on the key before its own; a waiter whose
// request switched its wake-up off (make mutations' lost-wakeup) has that
// watch's deletion dropped, and waits out its deadline with the lock free.
func TestEtcdWakeUp(t *testing.T) {
	cli := etcdtest.Start(t, 3).Client()
	holder := etcd.New(cli, etcd.Options{Key: "lock", TTL: 10 * time.Second})
	// The waiter's client counts its watches: the mutex watches the key
	// before its own once its read found it, from that read's revision, so
	// a deletion after that read is the watch's to tell.
	var watches atomic.Int32
	wcli := clientv3.NewCtxClient(cli.Ctx())
	wcli.KV, wcli.Lease, wcli.Watcher = cli.KV, cli.Lease, counted{cli.Watcher, &watches}
	waiter := etcd.New(wcli, etcd.Options{Key: "lock", TTL: 10 * time.Second})
	locktest.WakeUp(t, holder, waiter, func() func() bool {
		before := watches.Load()
		return func() bool { return watches.Load() > before }
	})
}

// counted is a Watcher that counts its watches.
type counted struct {
	clientv3.Watcher
	n *atomic.Int32
}

func (c counted) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	c.n.Add(1)
	return c.Watcher.Watch(ctx, key, opts...)
}
