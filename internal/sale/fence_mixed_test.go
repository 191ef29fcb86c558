package sale_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/builder"
	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/locks/handoff"
	"github.com/locklab/locklab/internal/locks/retry"
	lua "github.com/locklab/locklab/internal/locks/v6_lua"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/internal/sale"
	"github.com/locklab/locklab/internal/versions"
	"github.com/redis/go-redis/v9"
)

// A sale that asked for fencing and holds no token is refused before it
// touches the stock, never sold unfenced: here a lock that hands out token 0
// (an unfenced v6) under a fenced method. The lock is released.
func TestFencedSaleWithoutTokenIsRefused(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	setStock(t, rdb, 10)
	m := sale.Method{Name: "v6", Lock: locktest.Poll(lua.New(rdb, lua.Options{Key: "lock", TTL: time.Minute})), Fence: "redis"}
	res, err := newService(rdb, 5*time.Second).Sell(ctx, m)
	if !errors.Is(err, sale.ErrNoToken) {
		t.Fatalf("a fenced sale with token %d: %v, want ErrNoToken", res.Trace.Token, err)
	}
	if n := stock(t, rdb); n != 10 || !res.Trace.Read.At.IsZero() || !res.Trace.Written.At.IsZero() {
		t.Fatalf("stock %d, trace %+v: want the stock untouched at 10", n, res.Trace)
	}
	if n := rdb.Exists(ctx, "lock", key+":fence:redis").Val(); n != 0 {
		t.Fatalf("%d of the lock and the stock's fence left: want the lock released, no fenced access", n)
	}
}

// With -chaos a fenced and an unfenced sale share one lock: each variant is
// its own Locker on the same key, queue and Notifier, as the server builds
// them. A sale handed the lock by the other kind gets what it asked for: a
// fenced one a token its write is checked with (the stock's fence records
// it), an unfenced one none. Both orders, on the string lock (v4) and the
// hash (v7).
func TestMixedFencingThroughHandoff(t *testing.T) {
	for _, name := range []string{"v4", "v7"} {
		for _, secondFenced := range []bool{true, false} {
			t.Run(name+map[bool]string{true: " then fenced", false: " then unfenced"}[secondFenced], func(t *testing.T) {
				rdb := redistest.Start(t).Client()
				ctx := context.Background()
				setStock(t, rdb, 10)
				n := retry.NewNotifier(ctx, rdb, api.DefaultLockKey, time.Minute, 0, slog.New(slog.DiscardHandler))
				t.Cleanup(n.Close)
				deps := builder.Deps{Redis: rdb, Redlock: []redis.UniversalClient{rdb}, Notifier: n}
				first := builder.Build(deps, versions.Variant{Wait: "handoff", Fence: !secondFenced})[name]
				second := builder.Build(deps, versions.Variant{Wait: "handoff", Fence: secondFenced})[name]
				svc := newService(rdb, 5*time.Second)

				holding, thaw := make(chan struct{}), make(chan struct{})
				held := chaos.With(ctx, chaos.Faults{BeforeWrite: func(context.Context) {
					close(holding)
					<-thaw
				}})
				firstDone := make(chan error, 1)
				go func() {
					_, err := svc.Sell(held, first)
					firstDone <- err
				}()
				<-holding
				type sold struct {
					res sale.Result
					err error
				}
				secondDone := make(chan sold, 1)
				go func() {
					res, err := svc.Sell(ctx, second)
					secondDone <- sold{res, err}
				}()
				locktest.WaitFor(t, 5*time.Second, "the second sale in the hand-off queue", func() bool {
					return rdb.ZCard(ctx, handoff.For(api.DefaultLockKey).Queue).Val() == 1
				})
				close(thaw)
				if err := <-firstDone; err != nil {
					t.Fatalf("first sale: %v", err)
				}
				s := <-secondDone
				if s.err != nil || stock(t, rdb) != 8 {
					t.Fatalf("second sale: %v, stock %d; want both sold, the stock at 8", s.err, stock(t, rdb))
				}
				fence, err := rdb.HGetAll(ctx, key+":fence:redis").Result()
				if err != nil {
					t.Fatal(err)
				}
				tr := s.res.Trace
				switch {
				case secondFenced && (tr.Token <= 0 || fence["token"] != strconv.FormatInt(tr.Token, 10) || fence["owner"] != tr.Owner):
					t.Fatalf("fenced sale after an unfenced one: token %d, the stock's fence %v; want its token checked and recorded by the stock", tr.Token, fence)
				case !secondFenced && (tr.Token != 0 || fence["owner"] == tr.Owner):
					t.Fatalf("unfenced sale after a fenced one: token %d, the stock's fence %v; want no token", tr.Token, fence)
				}
			})
		}
	}
}
