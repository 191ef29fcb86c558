package sale_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/builder"
	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/retry"
	lua "github.com/locklab/locklab/internal/locks/v6_lua"
	reentrant "github.com/locklab/locklab/internal/locks/v7_reentrant"
	watchdog "github.com/locklab/locklab/internal/locks/v8_watchdog"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/internal/sale"
	"github.com/locklab/locklab/internal/versions"
	"github.com/redis/go-redis/v9"
)

// pauseHolder plays Kleppmann's scenario: A takes the lock, reads, and is
// frozen right before its write (its BeforeWrite hook blocks, as a process
// stopped by SIGSTOP, or a long GC pause, would) past its lease; B takes the
// lock and sells; A wakes and writes. It returns the stock afterwards and A's
// error.
func pauseHolder(t *testing.T, fenced bool, off chaos.Off) (stockAfter int, errA error) {
	t.Helper()
	rdb := redistest.Start(t).Client()
	setStock(t, rdb, 10)
	const lease = 50 * time.Millisecond
	m := sale.Method{Name: "v6", Lock: locktest.Poll(lua.New(rdb, lua.Options{Key: "lock", TTL: lease, Fence: fenced})), Fence: map[bool]string{true: "redis"}[fenced]}
	frozen, thaw := make(chan struct{}), make(chan struct{})
	freeze := chaos.With(context.Background(), chaos.Faults{Off: off, BeforeWrite: func(context.Context) {
		close(frozen)
		<-thaw
	}})
	svc := newService(rdb, 5*time.Second)
	done := make(chan error)
	go func() {
		_, err := svc.Sell(freeze, m)
		done <- err
	}()
	<-frozen
	locktest.WaitFor(t, 5*time.Second, "A's lease to expire while A is frozen", func() bool {
		return rdb.Exists(context.Background(), "lock").Val() == 0
	})
	if res, err := svc.Sell(context.Background(), m); err != nil || res.Remaining != 9 {
		t.Fatalf("B's sale: remaining %d, err %v; want 9, nil", res.Remaining, err)
	}
	close(thaw)
	errA = <-done
	return stock(t, rdb), errA
}

// Without fencing the frozen holder's write lands after its successor's: two
// units sold, one taken from the stock.
func TestPauseHolderOversellsWithoutFencing(t *testing.T) {
	after, errA := pauseHolder(t, false, chaos.Off{})
	if errA != nil || after != 9 {
		t.Fatalf("A: err %v, stock %d; want A to sell too and the stock at 9 (the oversell)", errA, after)
	}
}

// With fencing the storage refuses the stale write: one unit sold, one taken.
func TestPauseHolderIsFenced(t *testing.T) {
	after, errA := pauseHolder(t, true, chaos.Off{})
	if !errors.Is(errA, sale.ErrFenced) || after != 9 {
		t.Fatalf("A: err %v, stock %d; want ErrFenced and the stock at 9 (B's sale only)", errA, after)
	}
}

// onRead wraps the real client: after the stock's GET returns, it runs after
// (once), while the sale is between its read and its write.
type onRead struct {
	sale.Client
	after func()
	once  sync.Once
}

func (o *onRead) Get(ctx context.Context, k string) *redis.StringCmd {
	cmd := o.Client.Get(ctx, k)
	o.once.Do(o.after)
	return cmd
}

// The lock's key vanishes while the sale works (a node that forgot it). v8's
// watchdog finds the lease gone and closes Lost: the sale stops before its
// write. v7 has no watchdog, never learns, and writes anyway.
func TestLostLeaseStopsTheWrite(t *testing.T) {
	for name, tc := range map[string]struct {
		guard func(*redis.Client) retry.Guard
		lost  bool
	}{
		"v8": {func(rdb *redis.Client) retry.Guard {
			return watchdog.New(rdb, reentrant.Options{Key: "lock", TTL: 90 * time.Millisecond}, nil, nil)
		}, true},
		"v7": {func(rdb *redis.Client) retry.Guard {
			return reentrant.New(rdb, reentrant.Options{Key: "lock", TTL: 90 * time.Millisecond})
		}, false},
	} {
		t.Run(name, func(t *testing.T) {
			rdb := redistest.Start(t).Client()
			setStock(t, rdb, 5)
			c := &onRead{Client: rdb, after: func() {
				if err := rdb.Del(context.Background(), "lock").Err(); err != nil {
					t.Error(err)
				}
			}}
			// The work (300 ms) outlasts the watchdog's next renewal (30 ms) many times over.
			svc := sale.New(c, sale.Options{Key: key, Work: 300 * time.Millisecond, AcquireTimeout: time.Second})
			res, err := svc.Sell(context.Background(), sale.Method{Name: name, Lock: locktest.Poll(tc.guard(rdb)), Nested: true})
			if tc.lost {
				if !errors.Is(err, sale.ErrLeaseLost) || stock(t, rdb) != 5 {
					t.Fatalf("err %v, stock %d; want ErrLeaseLost and the stock untouched", err, stock(t, rdb))
				}
				return
			}
			if err != nil || stock(t, rdb) != 4 || !errors.Is(res.ReleaseErr, lease.ErrNotHeld) {
				t.Fatalf("err %v, stock %d, release %v; want the sale written (4) and the release not held", err, stock(t, rdb), res.ReleaseErr)
			}
		})
	}
}

// The sequence that broke our first fencing, on the real sale path: two
// replicas, fenced v4 to v7, a 100 ms lease. Sale S works 400 ms; once its
// lease has expired, sale B (on the other replica) takes the lock and reads,
// then works 800 ms; S writes first, then B. The stock must drop by exactly
// the units sold (S refused: 412), in whatever order the machine runs them.
func TestStaleHolderWritingFirstIsFenced(t *testing.T) {
	for _, name := range []string{"v4", "v5", "v6", "v7"} {
		t.Run(name, func(t *testing.T) {
			rdb := redistest.Start(t).Client()
			setStock(t, rdb, 10)
			replica := func() sale.Method {
				deps := builder.Deps{Redis: rdb, Redlock: []redis.UniversalClient{rdb}, TTL: 100 * time.Millisecond, Retry: time.Millisecond}
				return builder.Build(deps, versions.Variant{Wait: "poll", Fence: true})[name]
			}
			a, b := replica(), replica()
			svc := newService(rdb, 5*time.Second)
			sold := 0
			s := make(chan error, 1)
			go func() {
				_, err := svc.Sell(chaos.With(context.Background(), chaos.Faults{Hold: 400 * time.Millisecond}), a)
				s <- err
			}()
			locktest.WaitFor(t, 5*time.Second, "S to take the lock", func() bool { return rdb.Exists(context.Background(), api.DefaultLockKey).Val() == 1 })
			locktest.WaitFor(t, 5*time.Second, "S's lease to expire", func() bool { return rdb.Exists(context.Background(), api.DefaultLockKey).Val() == 0 })
			_, errB := svc.Sell(chaos.With(context.Background(), chaos.Faults{Hold: 800 * time.Millisecond}), b)
			errS := <-s
			for _, err := range []error{errS, errB} {
				switch {
				case err == nil:
					sold++
				case !errors.Is(err, sale.ErrFenced):
					t.Fatal(err)
				}
			}
			if taken := 10 - stock(t, rdb); sold != taken || errB != nil {
				t.Fatalf("%d sold, %d taken (S: %v, B: %v): want B sold and no unit sold twice", sold, taken, errS, errB)
			}
			t.Logf("S: %v; B sold", errS)
		})
	}
}
