package zk_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/zk"
	"github.com/locklab/locklab/internal/zktest"
)

// Queue reads the holder's node first, then the waiter's, each with its
// owner, its session and its creation zxid; the waiter moves to the front
// when the holder releases; with no member up it is an error by ctx's
// deadline.
func TestZKQueue(t *testing.T) {
	e := zktest.Start(t, 1)
	ctx := context.Background()
	a := zk.New(session(t, e, zk.SessionOptions{Timeout: 10 * time.Second}), zk.Options{Key: "queue"})
	b := zk.New(session(t, e, zk.SessionOptions{Timeout: 10 * time.Second}), zk.Options{Key: "queue"})
	if q, err := a.Queue(ctx); err != nil || len(q) != 0 {
		t.Fatalf("a lock never taken: queue %+v (err %v), want none", q, err)
	}
	held, err := a.Acquire(ctx, "owner-a")
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan lease.Lease, 1)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		l, err := b.Acquire(wctx, "owner-b")
		if err != nil {
			t.Error(err)
		}
		waiting <- l
	}()
	q := zkQueueOf(t, a, 2)
	for i, want := range []string{"owner-a", "owner-b"} {
		if e := q[i]; e.Owner != want || e.Holds != (i == 0) || !strings.HasPrefix(e.Key, a.Dir()+"/") || e.Session == "" || e.Session == "0" || e.Revision == 0 || e.PTTLms != nil {
			t.Fatalf("entry %d: %+v, want %s's node, its session and zxid, no lease", i, e, want)
		}
	}
	if q[0].Session == q[1].Session || q[0].Revision >= q[1].Revision {
		t.Fatalf("the queue %+v: want two sessions, the holder's node older", q)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next := <-waiting
	if after := zkQueueOf(t, a, 1); after[0].Key != q[1].Key || !after[0].Holds {
		t.Fatalf("after A's release the queue is %+v, want B's node %s holding", after, q[1].Key)
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
	zkQueueOf(t, a, 0)

	e.Members[0].Stop()
	dctx, stop := context.WithTimeout(ctx, time.Second)
	defer stop()
	if _, err := a.Queue(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no member up: err %v, want the deadline", err)
	}
}

// zkQueueOf waits until the queue has n entries (a waiter's node is made by
// its own goroutine) and returns it.
func zkQueueOf(t *testing.T, l *zk.Locker, n int) []api.QueueEntry {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		q, err := l.Queue(ctx)
		cancel()
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
