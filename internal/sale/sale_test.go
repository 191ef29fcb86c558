package sale_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/retry"
	mutex "github.com/locklab/locklab/internal/locks/v1_mutex"
	lua "github.com/locklab/locklab/internal/locks/v6_lua"
	reentrant "github.com/locklab/locklab/internal/locks/v7_reentrant"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/internal/sale"
	"github.com/redis/go-redis/v9"
)

const key = api.DefaultStockKey

func newService(rdb sale.Client, timeout time.Duration) *sale.Service {
	return sale.New(rdb, sale.Options{Key: key, AcquireTimeout: timeout})
}

func setStock(t *testing.T, rdb *redis.Client, v any) {
	t.Helper()
	if err := rdb.Set(context.Background(), key, v, 0).Err(); err != nil {
		t.Fatal(err)
	}
}

func stock(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	n, err := rdb.Get(context.Background(), key).Int()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// barrier wraps the real client so that every GET of the stock waits until
// the given number of GETs have been made: the sales that share it all read
// the stock before any of them writes it. That makes an overlap certain
// instead of likely.
type barrier struct {
	sale.Client
	arrived sync.WaitGroup
}

func newBarrier(c sale.Client, n int) *barrier {
	b := &barrier{Client: c}
	b.arrived.Add(n)
	return b
}

func (b *barrier) Get(ctx context.Context, k string) *redis.StringCmd {
	cmd := b.Client.Get(ctx, k)
	b.arrived.Done()
	b.arrived.Wait()
	return cmd
}

// Two replicas whose sales overlap both sell, and the stock drops by one:
// the oversell, with no lock (none) and with a lock per process (v1).
func TestOverlappingSalesOversell(t *testing.T) {
	for name, locks := range map[string][2]sale.Locker{
		"none": {nil, nil},
		"v1":   {retry.Local(mutex.New(), nil), retry.Local(mutex.New(), nil)},
	} {
		t.Run(name, func(t *testing.T) {
			rdb := redistest.Start(t).Client()
			setStock(t, rdb, 10)
			b := newBarrier(rdb, 2)
			var sold atomic.Int32
			var wg sync.WaitGroup
			for _, l := range locks {
				wg.Go(func() {
					_, err := newService(b, time.Second).Sell(context.Background(), sale.Method{Name: name, Lock: l})
					if err == nil {
						sold.Add(1)
					}
				})
			}
			wg.Wait()
			if got := stock(t, rdb); sold.Load() != 2 || got != 9 {
				t.Fatalf("sold %d with stock 10 -> %d; want 2 sold and stock 9 (one unit sold twice)", sold.Load(), got)
			}
		})
	}
}

// sellConcurrently runs n sales split over two replicas and returns how many sold.
func sellConcurrently(t *testing.T, rdb *redis.Client, n int, m [2]sale.Method) int {
	t.Helper()
	var sold atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			_, err := newService(rdb, 30*time.Second).Sell(context.Background(), m[i%2])
			switch {
			case err == nil:
				sold.Add(1)
			case !errors.Is(err, sale.ErrSoldOut):
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return int(sold.Load())
}

func TestGuardedAndAtomicSellExactly(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	for name, m := range map[string][2]sale.Method{
		"v6":     {{Lock: v6(srv.Client(), "lock", 20*time.Second)}, {Lock: v6(srv.Client(), "lock", 20*time.Second)}},
		"atomic": {{Atomic: true}, {Atomic: true}},
	} {
		t.Run(name, func(t *testing.T) {
			setStock(t, rdb, 25)
			if sold := sellConcurrently(t, rdb, 40, m); sold != 25 || stock(t, rdb) != 0 {
				t.Fatalf("sold %d, stock %d; want 25 sold, stock 0", sold, stock(t, rdb))
			}
		})
	}
}

// A missing or non-numeric stock is an error, never "sold out".
func TestBadStock(t *testing.T) {
	rdb := redistest.Start(t).Client()
	svc := newService(rdb, time.Second)
	for _, m := range []sale.Method{{Name: "none"}, {Name: "atomic", Atomic: true}} {
		t.Run(m.Name, func(t *testing.T) {
			if err := rdb.Del(context.Background(), key).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.Sell(context.Background(), m); !errors.Is(err, sale.ErrStockMissing) {
				t.Fatalf("missing key: err = %v, want ErrStockMissing", err)
			}
			for _, v := range []string{"abc", "1.5"} {
				setStock(t, rdb, v)
				if _, err := svc.Sell(context.Background(), m); !errors.Is(err, sale.ErrStockCorrupt) {
					t.Fatalf("stock %q: err = %v, want ErrStockCorrupt", v, err)
				}
			}
			setStock(t, rdb, 0)
			if _, err := svc.Sell(context.Background(), m); !errors.Is(err, sale.ErrSoldOut) {
				t.Fatalf("stock 0: err = %v, want ErrSoldOut", err)
			}
			if stock(t, rdb) != 0 {
				t.Fatal("stock changed by a sold-out sale")
			}
		})
	}
}

// v6 is a v6 lock on key, waiting as the tests do.
func v6(rdb *redis.Client, key string, ttl time.Duration) sale.Locker {
	return locktest.Poll(lua.New(rdb, lua.Options{Key: key, TTL: ttl}))
}

func TestLockTimeoutSellsNothing(t *testing.T) {
	rdb := redistest.Start(t).Client()
	setStock(t, rdb, 5)
	g := v6(rdb, "lock", 20*time.Second)
	held, err := g.Acquire(context.Background(), "someone else")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	_, err = newService(rdb, 30*time.Millisecond).Sell(context.Background(), sale.Method{Lock: g})
	if !errors.Is(err, sale.ErrLockTimeout) {
		t.Fatalf("err = %v, want ErrLockTimeout", err)
	}
	if stock(t, rdb) != 5 {
		t.Fatal("stock changed without the lock")
	}
}

// Redis not reached in time (on Compose: looking up the name of a stopped
// node took longer than the dial timeout) is Redis failing, not a lock
// timeout, though a dial's timeout matches context.DeadlineExceeded: the
// acquire deadline is far off. Nothing is sold.
func TestDialTimeoutIsNotALockTimeout(t *testing.T) {
	srv := redistest.Start(t)
	setStock(t, srv.Client(), 5)
	rdb := srv.Client()
	rdb.AddHook(dialTimedOut{})
	_, err := newService(rdb, time.Minute).Sell(context.Background(), sale.Method{Lock: v6(rdb, "lock", 20*time.Second)})
	var netErr net.Error
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &netErr) || !netErr.Timeout() || errors.Is(err, sale.ErrLockTimeout) {
		t.Fatalf("err = %v, want the dial's timeout, not ErrLockTimeout", err)
	}
	if stock(t, srv.Client()) != 5 {
		t.Fatal("stock changed without the lock")
	}
}

// dialTimedOut makes every dial of the client it hooks time out: a real
// dial, with its deadline already passed.
type dialTimedOut struct{}

func (dialTimedOut) DialHook(redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return (&net.Dialer{Deadline: time.Now()}).DialContext(ctx, network, addr)
	}
}
func (dialTimedOut) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (dialTimedOut) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A client that goes away while waiting is not a lock timeout, and leaves no lock.
func TestClientGoneWhileWaiting(t *testing.T) {
	rdb := redistest.Start(t).Client()
	setStock(t, rdb, 5)
	g := v6(rdb, "lock", 20*time.Second)
	held, err := g.Acquire(context.Background(), "holder")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := newService(rdb, 10*time.Second).Sell(ctx, sale.Method{Lock: g})
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || errors.Is(err, sale.ErrLockTimeout) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if err := held.Release(context.Background()); err != nil {
		t.Fatalf("the holder's lock was disturbed: %v", err)
	}
	if rdb.Exists(context.Background(), "lock").Val() != 0 {
		t.Fatal("a lock was left behind")
	}
}

// The tutorial's v7 /sale takes the lock twice. A reentrant guard sells; a
// non-reentrant one (v6) waits on itself until the deadline, sells nothing
// and releases its outer hold.
func TestNestedAcquisition(t *testing.T) {
	rdb := redistest.Start(t).Client()
	setStock(t, rdb, 5)
	svc := newService(rdb, 50*time.Millisecond)
	v7 := locktest.Poll(reentrant.New(rdb, reentrant.Options{Key: "lock7", TTL: 20 * time.Second}))
	if res, err := svc.Sell(context.Background(), sale.Method{Lock: v7, Nested: true}); err != nil || res.Remaining != 4 {
		t.Fatalf("v7 nested: remaining %d, err %v; want 4, nil", res.Remaining, err)
	}
	if _, err := svc.Sell(context.Background(), sale.Method{Lock: v6(rdb, "lock6", 20*time.Second), Nested: true}); !errors.Is(err, sale.ErrLockTimeout) {
		t.Fatalf("v6 nested: err = %v, want ErrLockTimeout", err)
	}
	if stock(t, rdb) != 4 || rdb.Exists(context.Background(), "lock6", "lock7").Val() != 0 {
		t.Fatal("stock changed or a lock was left behind")
	}
}

// Work longer than the lease: the sale goes through but reports that its
// lock expired before release.
func TestLeaseLostDuringWorkIsReported(t *testing.T) {
	rdb := redistest.Start(t).Client()
	setStock(t, rdb, 5)
	svc := sale.New(rdb, sale.Options{Key: key, AcquireTimeout: time.Second, Work: 150 * time.Millisecond})
	res, err := svc.Sell(context.Background(), sale.Method{Lock: v6(rdb, "lock", 30*time.Millisecond)})
	if err != nil || res.Remaining != 4 {
		t.Fatalf("remaining %d, err %v; want 4, nil", res.Remaining, err)
	}
	if !errors.Is(res.ReleaseErr, lease.ErrNotHeld) {
		t.Fatalf("ReleaseErr = %v, want lease.ErrNotHeld", res.ReleaseErr)
	}
	// The history carries it too: the trace says why the release failed.
	if !res.Trace.NotHeld || res.Trace.ReleaseError != res.ReleaseErr.Error() {
		t.Fatalf("trace: not_held %t, release_error %q; want true, %q", res.Trace.NotHeld, res.Trace.ReleaseError, res.ReleaseErr)
	}
}
