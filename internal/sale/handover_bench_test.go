package sale_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/builder"
	"github.com/locklab/locklab/internal/locks/retry"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/internal/sale"
	"github.com/locklab/locklab/internal/versions"
	"github.com/redis/go-redis/v9"
)

// holdSum adds up the sales' holds (sale.Observer).
type holdSum struct{ ns, n atomic.Int64 }

func (*holdSum) Acquired(sale.Method, time.Duration, error) {}
func (h *holdSum) Held(_ sale.Method, d time.Duration) {
	h.ns.Add(int64(d))
	h.n.Add(1)
}

// BenchmarkHandover is v6 handed off on a real redis-server, two replicas
// (each its own client and subscription) and 32 sales at once, no work in
// the lock, no HTTP: the lock's own hand-over. It reports each sale's share
// of the time (ns/op), the mean hold, the hand-over (share minus hold: the
// lock passing from holder to holder) and a Redis round trip (PINGs from
// another client during the run, median), in µs.
//
//	go test ./internal/sale -run '^$' -bench Handover -count 5
func BenchmarkHandover(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client()
	ctx := context.Background()
	if err := rdb.Set(ctx, api.DefaultStockKey, 1<<40, 0).Err(); err != nil {
		b.Fatal(err)
	}
	var held holdSum
	type rep struct {
		svc *sale.Service
		m   sale.Method
	}
	var reps []rep
	for range 2 {
		c := srv.Client()
		n := retry.NewNotifier(ctx, c, api.DefaultLockKey, time.Minute, 0, slog.New(slog.DiscardHandler))
		b.Cleanup(n.Close)
		deps := builder.Deps{Redis: c, Redlock: []redis.UniversalClient{c}, Notifier: n}
		m := builder.Build(deps, versions.Variant{Wait: "handoff"})["v6"]
		reps = append(reps, rep{sale.New(c, sale.Options{Key: api.DefaultStockKey, AcquireTimeout: 10 * time.Second, Observer: &held}), m})
	}
	probe := srv.Client()
	var rtts []float64
	stop, probed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(probed)
		t := time.NewTicker(3 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				start := time.Now()
				if probe.Ping(ctx).Err() == nil {
					rtts = append(rtts, float64(time.Since(start).Nanoseconds())/1e3)
				}
			}
		}
	}()
	var left atomic.Int64
	left.Store(int64(b.N))
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 32 {
		r := reps[i%2]
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if _, err := r.svc.Sell(ctx, r.m); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(stop)
	<-probed
	share := float64(elapsed.Nanoseconds()) / float64(b.N) / 1e3
	hold := float64(held.ns.Load()) / float64(max(held.n.Load(), 1)) / 1e3
	b.ReportMetric(hold, "hold-µs")
	b.ReportMetric(share-hold, "handover-µs")
	if len(rtts) > 0 {
		slices.Sort(rtts)
		b.ReportMetric(rtts[len(rtts)/2], "rtt-µs")
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "sales/s")
}
