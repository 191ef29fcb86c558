package sale_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/retry"
	mutex "github.com/locklab/locklab/internal/locks/v1_mutex"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/internal/sale"
)

// A write whose reply was lost is ErrIndeterminate, never a plain failure:
// the stock did change. Each way of writing: SET, the fenced script, the
// atomic script.
func TestLostWriteReplyIsIndeterminate(t *testing.T) {
	srv := redistest.Start(t)
	for name, tc := range map[string]struct {
		m    sale.Method
		lose []string
	}{
		// The lock has its own client: only the stock's write loses its reply.
		"set":    {sale.Method{Name: "v6", Lock: v6(srv.Client(), "lock:set", 20*time.Second)}, []string{"set"}},
		"atomic": {sale.Method{Name: "atomic", Atomic: true}, []string{"evalsha", "eval"}},
	} {
		t.Run(name, func(t *testing.T) {
			rdb := srv.Client()
			setStock(t, rdb, 5)
			redistest.LoseReplies(rdb, 1, tc.lose...)
			_, err := sale.New(rdb, sale.Options{Key: key}).Sell(context.Background(), tc.m)
			if !errors.Is(err, sale.ErrIndeterminate) {
				t.Fatalf("err = %v, want ErrIndeterminate", err)
			}
			if got := stock(t, srv.Client()); got != 4 {
				t.Fatalf("stock %d: the lost write must have been applied (4)", got)
			}
			if srv.Client().Exists(context.Background(), "lock:set").Val() != 0 {
				t.Fatal("a lock was left behind")
			}
		})
	}
}

// A holder finishes whatever its caller does: a client that goes away after
// the lock is obtained neither stops the write nor skips the release.
func TestHolderFinishesWhenClientLeaves(t *testing.T) {
	rdb := redistest.Start(t).Client()
	setStock(t, rdb, 5)
	ctx, cancel := context.WithCancel(context.Background())
	ctx = chaos.With(ctx, chaos.Faults{Hold: 50 * time.Millisecond, BeforeWrite: func(context.Context) {}})
	svc := newService(rdb, time.Second)
	done := make(chan error, 1)
	obtained := make(chan struct{})
	g := v6(rdb, "lock", 20*time.Second)
	go func() {
		_, err := svc.Sell(ctx, sale.Method{Lock: notify{g, obtained}})
		done <- err
	}()
	<-obtained
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("a holder whose client left: %v, want the sale done", err)
	}
	if got := stock(t, rdb); got != 4 {
		t.Fatalf("stock %d, want 4", got)
	}
	if rdb.Exists(context.Background(), "lock").Val() != 0 {
		t.Fatal("the lock was left behind")
	}
}

// notify is a Locker that says when it has obtained the lock.
type notify struct {
	sale.Locker
	obtained chan struct{}
}

func (n notify) Acquire(ctx context.Context, owner string) (lease.Lease, error) {
	l, err := n.Locker.Acquire(ctx, owner)
	close(n.obtained)
	return l, err
}

// A panic in the middle of a sale still releases the lock: a Redis lock and
// v1's process mutex alike.
func TestPanicReleasesTheLock(t *testing.T) {
	rdb := redistest.Start(t).Client()
	setStock(t, rdb, 5)
	svc := newService(rdb, 50*time.Millisecond)
	boom := chaos.With(context.Background(), chaos.Faults{BeforeWrite: func(context.Context) { panic("boom") }})
	for name, l := range map[string]sale.Locker{"v1": retry.Local(mutex.New(), nil), "v6": v6(rdb, "lock", 20*time.Second)} {
		t.Run(name, func(t *testing.T) {
			func() {
				defer func() {
					if recover() == nil {
						t.Fatal("no panic")
					}
				}()
				_, _ = svc.Sell(boom, sale.Method{Lock: l})
			}()
			if _, err := svc.Sell(context.Background(), sale.Method{Lock: l}); err != nil {
				t.Fatalf("the sale after a panic: %v; the lock must have been released", err)
			}
		})
	}
}

// FuzzStockValues: Go (sale.ParseStock, the read-check-write path) and Lua
// (decrement.lua, the atomic path) classify every stored value the same way:
// not a stock, sold out, or a stock to sell from; Redis's own DECR agrees.
func FuzzStockValues(f *testing.F) {
	for _, v := range []string{"5", "0", "-0", " 5", "5 ", "+5", "05", "1e3", "0x10", "5.0", "-5", "", "abc",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809", "1" + string(rune(0)),
		"9007199254740991", "9007199254740992", "9007199254740993", "9007199254740994", "9007199254740995"} { // 2^53 - 1 .. 2^53 + 3: where Lua's doubles stop being exact
		f.Add(v)
	}
	rdb := redistest.Start(f).Client()
	svc := sale.New(rdb, sale.Options{Key: key})
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, v string) {
		if err := rdb.Set(ctx, key, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		n, goOK := sale.ParseStock(v)
		// Redis's DECR reads the same values, but for the smallest int64,
		// which it cannot decrement (and which sells nothing).
		if _, err := rdb.Decr(ctx, key).Result(); (err == nil) != goOK && n != -1<<63 {
			t.Fatalf("%q: Go reads it %t, Redis's DECR: %v", v, goOK, err)
		}
		if err := rdb.Set(ctx, key, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		res, err := svc.Sell(ctx, sale.Method{Atomic: true})
		switch {
		case !goOK:
			if !errors.Is(err, sale.ErrStockCorrupt) {
				t.Fatalf("%q: Go says not a stock, Lua: %v", v, err)
			}
		case n <= 0:
			if !errors.Is(err, sale.ErrSoldOut) {
				t.Fatalf("%q: Go says sold out, Lua: %v", v, err)
			}
		case err != nil || res.Remaining != n-1:
			t.Fatalf("%q: Go says %d, Lua: remaining %d, %v", v, n, res.Remaining, err)
		}
		if goOK && strconv.FormatInt(n, 10) != v {
			t.Fatalf("%q read as %d: not its canonical form", v, n)
		}
	})
}
