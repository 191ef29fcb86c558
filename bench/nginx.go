package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/locklab/locklab/internal/loadtest"
)

// throughNginx runs r's version through nginx for the bench's duration, with
// stock that never runs out, and returns the median Redis round trip
// measured during it (µs, probeRoundTrips); around atomic's run it also
// measures the nginx ceiling (half before, half after) and returns it (0 for
// the others).
func (b *bench) throughNginx(ctx context.Context, r Row) (res loadtest.Result, ceiling, rtt float64, err error) {
	var before loadtest.Result
	if r.Lock == "atomic" {
		var err error
		if before, err = b.nginx(ctx, b.o.duration/2); err != nil {
			return loadtest.Result{}, 0, 0, err
		}
	}
	probe := b.probeRoundTrips(ctx)
	res, err = loadtest.Run(ctx, loadtest.Config{URL: b.o.url, Requests: 1 << 30, Concurrency: b.o.concurrency, Stock: benchStock,
		Duration: b.o.duration, Wait: r.query(), Client: b.service, NoCheck: true}, r.Lock)
	rtt = probe()
	if err != nil {
		return res, 0, rtt, fmt.Errorf("%s (%s) through nginx: %w", r.Lock, r.Wait, err)
	}
	if r.Lock != "atomic" {
		return res, 0, rtt, nil
	}
	after, err := b.nginx(ctx, b.o.duration/2)
	if err != nil {
		return res, 0, rtt, err
	}
	ceiling = float64(before.Requests+after.Requests) / (before.Seconds + after.Seconds)
	b.nginxRounds = append(b.nginxRounds, ceiling)
	b.rep.Nginx = median(slices.Clone(b.nginxRounds))
	b.say("nginx ceiling (GET /healthz, c=%d, before and after atomic): %.0f requests/s", b.o.concurrency, ceiling)
	return res, ceiling, rtt, nil
}

// nginx is the nginx ceiling: GET /healthz through nginx for d.
func (b *bench) nginx(ctx context.Context, d time.Duration) (loadtest.Result, error) {
	healthz := b.service.URL("healthz")
	res, err := loadtest.Run(ctx, loadtest.Config{URL: healthz, Plain: true, Requests: 1 << 30, Concurrency: b.o.concurrency,
		Duration: d, Client: b.service}, "")
	if err == nil && res.NotServed() > 0 {
		err = fmt.Errorf("%d of %d requests to %s failed", res.NotServed(), res.Requests, healthz)
	}
	if err != nil {
		return res, fmt.Errorf("nginx ceiling: %w", err)
	}
	return res, nil
}

// defaultLoadTests runs the default load test (n=1000, c=100, stock 100)
// for every version, the service's defaults.
func (b *bench) defaultLoadTests(ctx context.Context) error {
	for _, d := range b.defaults {
		res, err := loadtest.Run(ctx, loadtest.Config{URL: b.o.url, Requests: 1000, Concurrency: 100, Stock: 100,
			Wait: d.query(), Client: b.service, NoCheck: true}, d.Lock)
		if err != nil {
			return fmt.Errorf("%s (%s) default load test: %w", d.Lock, d.Wait, err)
		}
		b.rep.Default = append(b.rep.Default, DefaultRun{Lock: d.Lock, Wait: d.Wait, Sold: res.Sold, SoldOut: res.SoldOut,
			Failed: res.NotServed(), FailedBy: res.FailedBy, Oversold: res.Oversold, P99: res.Latency.P99})
	}
	b.say("default load test (n=1000, c=100): %d runs", len(b.rep.Default))
	return nil
}
