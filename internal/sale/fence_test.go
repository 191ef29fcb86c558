package sale_test

import (
	"context"
	"errors"
	"testing"
	"time"

	lua "github.com/locklab/locklab/internal/locks/v6_lua"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/internal/sale"
	"github.com/redis/go-redis/v9"
)

// freezer wraps the real client: the first GET of the stock returns, then the
// caller is frozen until thaw is closed, as a process stopped by SIGSTOP (or a
// long GC pause) right after reading would be.
type freezer struct {
	sale.Client
	frozen chan struct{} // closed once the reader is frozen
	thaw   chan struct{}
}

func (f *freezer) Get(ctx context.Context, k string) *redis.StringCmd {
	cmd := f.Client.Get(ctx, k)
	close(f.frozen)
	<-f.thaw
	return cmd
}

// pauseHolder plays Kleppmann's scenario: A takes the lock and reads, freezes
// past its lease; B takes the lock and sells; A wakes and writes. It returns
// the stock afterwards and A's error.
func pauseHolder(t *testing.T, fenced bool) (stockAfter int, errA error) {
	t.Helper()
	rdb := redistest.Start(t).Client()
	setStock(t, rdb, 10)
	const lease = 50 * time.Millisecond
	m := sale.Method{Name: "v6", Guard: lua.New(rdb, "lock", lease, time.Millisecond), Fence: fenced}
	f := &freezer{Client: rdb, frozen: make(chan struct{}), thaw: make(chan struct{})}
	a := sale.New(f, sale.Options{Key: key, AcquireTimeout: time.Second})
	b := sale.New(rdb, sale.Options{Key: key, AcquireTimeout: 5 * time.Second})

	done := make(chan error)
	go func() {
		_, err := a.Sell(context.Background(), m)
		done <- err
	}()
	<-f.frozen
	locktest.WaitFor(t, 5*time.Second, "A's lease to expire while A is frozen", func() bool {
		return rdb.Exists(context.Background(), "lock").Val() == 0
	})
	if res, err := b.Sell(context.Background(), m); err != nil || res.Remaining != 9 {
		t.Fatalf("B's sale: remaining %d, err %v; want 9, nil", res.Remaining, err)
	}
	close(f.thaw)
	errA = <-done
	return stock(t, rdb), errA
}

// Without fencing the frozen holder's write lands after its successor's: two
// units sold, one taken from the stock.
func TestPauseHolderOversellsWithoutFencing(t *testing.T) {
	after, errA := pauseHolder(t, false)
	if errA != nil || after != 9 {
		t.Fatalf("A: err %v, stock %d; want A to sell too and the stock at 9 (the oversell)", errA, after)
	}
}

// With fencing the storage refuses the stale write: one unit sold, one taken.
func TestPauseHolderIsFenced(t *testing.T) {
	after, errA := pauseHolder(t, true)
	if !errors.Is(errA, sale.ErrFenced) || after != 9 {
		t.Fatalf("A: err %v, stock %d; want ErrFenced and the stock at 9 (B's sale only)", errA, after)
	}
}

// A guard that cannot fence is refused clearly, not silently unfenced.
func TestFenceNeedsAFencedGuard(t *testing.T) {
	rdb := redistest.Start(t).Client()
	setStock(t, rdb, 1)
	_, err := newService(rdb, time.Second).Sell(context.Background(), sale.Method{Name: "x", Guard: noFence{}, Fence: true})
	if err == nil || stock(t, rdb) != 1 {
		t.Fatalf("err %v, stock %d; want an error and the stock untouched", err, stock(t, rdb))
	}
}

type noFence struct{}

func (noFence) Acquire(context.Context, string) (func(context.Context) error, error) {
	return func(context.Context) error { return nil }, nil
}
