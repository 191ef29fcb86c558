package etcd_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/etcdtest"
	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/etcd"
)

// Queue reads the holder's key first, then the waiter's, each ending with
// its lease, with its create revision and its lease counting down; the
// waiter moves to the front when the holder releases; a frozen cluster is
// an error by the request's bound, not a wait.
func TestEtcdQueue(t *testing.T) {
	c := etcdtest.Start(t, 1)
	ctx := context.Background()
	a := etcd.New(c.Client(), etcd.Options{Key: "lock", TTL: 10 * time.Second})
	b := etcd.New(c.Client(), etcd.Options{Key: "lock", TTL: 10 * time.Second})
	if q, err := a.Queue(ctx); err != nil || len(q) != 0 {
		t.Fatalf("a free lock's queue: %+v (err %v), want none", q, err)
	}
	held, err := a.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan lease.Lease, 1)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		l, err := b.Acquire(wctx, "b")
		if err != nil {
			t.Error(err)
		}
		waiting <- l
	}()
	q := queueOf(t, a, 2)
	for i, e := range q {
		if e.Holds != (i == 0) || !strings.HasPrefix(e.Key, a.Prefix()) || e.Lease == "" || !strings.HasSuffix(e.Key, "/"+e.Lease) ||
			e.PTTLms == nil || *e.PTTLms <= 0 || *e.PTTLms > 10000 {
			t.Fatalf("entry %d: %+v, want a key of the prefix ending with its lease, that lease 0-10 s from its end, the first holding", i, e)
		}
	}
	if q[0].Revision >= q[1].Revision {
		t.Fatalf("the holder's revision %d is not older than the waiter's %d", q[0].Revision, q[1].Revision)
	}
	release(t, held)
	next := <-waiting
	if after := queueOf(t, a, 1); after[0].Key != q[1].Key || !after[0].Holds {
		t.Fatalf("after A's release the queue is %+v, want B's key %s holding", after, q[1].Key)
	}
	release(t, next)
	queueOf(t, a, 0)

	c.Freeze(true)
	defer c.Freeze(false)
	start := time.Now()
	if _, err := a.Queue(ctx); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > etcd.RequestTimeout+2*time.Second {
		t.Fatalf("a frozen cluster's queue: err %v after %v, want its deadline within RequestTimeout", err, time.Since(start))
	}
}

// queueOf waits until the queue has n entries (a waiter's key is put by its
// own goroutine) and returns it.
func queueOf(t *testing.T, l *etcd.Locker, n int) []api.QueueEntry {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		q, err := l.Queue(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(q) == n {
			return q
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queue is %+v, want %d entries", q, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
