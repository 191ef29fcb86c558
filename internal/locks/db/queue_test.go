package db_test

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/dbtest"
	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/db"
)

// GetLockQueue reads the holding connection first, then the waiters in
// GET_LOCK, longest waiting first: a connection that took the lock by hand,
// GetLock's own waiter, a second hand-made waiter; the waiter holds once
// the holder releases; a server that is gone is an error.
func TestGetLockQueue(t *testing.T) {
	s := dbtest.Start(t)
	ctx := context.Background()
	pool := s.Holds()
	if q, err := db.GetLockQueue(ctx, pool, "q"); err != nil || len(q) != 0 {
		t.Fatalf("a free lock: %+v (err %v), want nobody", q, err)
	}
	a, aID := conn(t, pool)
	var got int
	if err := a.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", db.GetLockName("q")).Scan(&got); err != nil || got != 1 {
		t.Fatalf("A's GET_LOCK: %d, %v", got, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	waiter := make(chan lease.Lease, 1)
	go func() {
		l, err := db.NewGetLock(pool, db.GetLockOptions{Key: "q"}).Acquire(wctx, "b")
		if err != nil {
			t.Error(err)
		}
		waiter <- l
	}()
	q := getLockQueueOf(t, pool, 2)
	c, cID := conn(t, pool)
	go func() { _, _ = c.ExecContext(wctx, "SELECT GET_LOCK(?, 60)", db.GetLockName("q")) }()
	q = getLockQueueOf(t, pool, 3)
	b := q[1].Conn
	if q[0].Conn != aID || !q[0].Holds || q[1].Holds || b == aID || b == cID || q[2].Conn != cID || q[2].Holds || q[1].WaitedMs < q[2].WaitedMs {
		t.Fatalf("the queue: %+v, want A (%s) holding, then GetLock's waiter, then C (%s)", q, aID, cID)
	}
	if _, err := a.ExecContext(ctx, "SELECT RELEASE_LOCK(?)", db.GetLockName("q")); err != nil {
		t.Fatal(err)
	}
	held := <-waiter
	if q = getLockQueueOf(t, pool, 2); q[0].Conn != b || !q[0].Holds || q[1].Conn != cID {
		t.Fatalf("after A's release: %+v, want %s holding, then C (%s)", q, b, cID)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	cancel() // C's wait ends with its connection, closed by the test's end

	s.Stop()
	dctx, stop := context.WithTimeout(ctx, 3*time.Second)
	defer stop()
	if _, err := db.GetLockQueue(dctx, s.DB(), "q"); err == nil {
		t.Fatal("the server gone, yet its named lock was read")
	}
}

// RowQueue reads db's row: nobody before the first hold, the holder with
// its hold running out, nobody once released; SeedQueue the seed's row,
// gone once released.
func TestRowQueue(t *testing.T) {
	s := dbtest.Start(t)
	ctx := context.Background()
	pool, err := db.Open(s.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	for _, c := range []struct {
		name string
		read func(context.Context, db.Querier, string) ([]api.QueueEntry, error)
		lock interface {
			TryAcquire(context.Context, string) (lease.Lease, error)
		}
	}{
		{"db", db.RowQueue, db.New(pool, db.Options{Key: "row", TTL: 5 * time.Second})},
		{"db-seed", db.SeedQueue, db.NewSeed(pool, db.Options{Key: "row", TTL: 5 * time.Second})},
	} {
		if q, err := c.read(ctx, pool, "row"); err != nil || len(q) != 0 {
			t.Fatalf("%s never taken (no table yet): %+v (err %v), want nobody", c.name, q, err)
		}
		held, err := c.lock.TryAcquire(ctx, c.name+"-owner")
		if err != nil {
			t.Fatal(err)
		}
		q, err := c.read(ctx, pool, "row")
		if err != nil || len(q) != 1 || q[0].Owner != c.name+"-owner" || !q[0].Holds || q[0].PTTLms == nil || *q[0].PTTLms <= 0 || *q[0].PTTLms > 5000 {
			t.Fatalf("%s held: %+v (err %v), want its owner holding, 0-5 s left", c.name, q, err)
		}
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if q, err := c.read(ctx, pool, "row"); err != nil || len(q) != 0 {
			t.Fatalf("%s released: %+v (err %v), want nobody", c.name, q, err)
		}
	}
	s.Stop()
	if _, err := db.RowQueue(ctx, pool, "row"); err == nil || errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("the server gone: err %v, want the connection's", err)
	}
}

// conn takes a connection of its own and its id, closed at the test's end.
func conn(t *testing.T, pool *sql.DB) (*sql.Conn, string) {
	t.Helper()
	c, err := pool.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var id int64
	if err := c.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return c, strconv.FormatInt(id, 10)
}

// getLockQueueOf waits until the named lock "q" has n holders and waiters
// (a waiter starts in its own goroutine) and returns them.
func getLockQueueOf(t *testing.T, pool *sql.DB, n int) []api.QueueEntry {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		q, err := db.GetLockQueue(context.Background(), pool, "q")
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
