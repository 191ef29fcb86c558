package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/loadtest"
	"github.com/locklab/locklab/internal/locks/retry"
	lua "github.com/locklab/locklab/internal/locks/v6_lua"
	"github.com/locklab/locklab/internal/sale"
	"github.com/locklab/locklab/internal/versions"
	"github.com/redis/go-redis/v9"
)

// Report is one bench run, as printed and as written to JSON.
type Report struct {
	Date        string            `json:"date"`
	Machine     string            `json:"machine"`
	Settings    map[string]string `json:"replica_settings"`
	Concurrency int               `json:"concurrency"`
	Seconds     float64           `json:"seconds_per_version"`
	// Serial is the four-command loop's rate: SET NX PX, GET, SET, Lua
	// release from one goroutine. No single-lock design sells faster.
	Serial float64 `json:"serial_ceiling_per_sec"`
	// Nginx is GET /healthz through nginx: the HTTP path's ceiling.
	Nginx    float64            `json:"nginx_ceiling_per_sec"`
	Rows     []Row              `json:"versions"`
	Default  []DefaultRun       `json:"default_load_test"`
	MemoryMB map[string]float64 `json:"replica_peak_rss_mb"`
	Targets  []Target           `json:"targets"`
}

// Row is one version with one way of waiting.
type Row struct {
	Lock string `json:"lock"`
	Wait string `json:"wait,omitempty"`
	// Own is its own ceiling: acquire, sale, release, serially, no HTTP.
	Own         float64 `json:"own_ceiling_per_sec"`
	OwnVsSerial float64 `json:"own_vs_serial"`
	// Through nginx, -c concurrent sales.
	Sales  float64 `json:"sales_per_sec"`
	P50    float64 `json:"p50_ms"`
	P99    float64 `json:"p99_ms"`
	Failed int     `json:"failed"`
	// Ratio is Sales over Own (over the nginx ceiling for atomic, which has
	// no lock to serialise on).
	Ratio   float64 `json:"ratio"`
	RatioOf string  `json:"ratio_of"`
}

// DefaultRun is one version under the default load test.
type DefaultRun struct {
	Lock     string         `json:"lock"`
	Wait     string         `json:"wait,omitempty"`
	Sold     int            `json:"sold"`
	SoldOut  int            `json:"sold_out"`
	Failed   int            `json:"failed"`
	FailedBy map[string]int `json:"failed_by,omitempty"`
	Oversold int64          `json:"oversold"`
	P99      float64        `json:"p99_ms"`
}

// Target is one of issue 6's targets, checked against this run.
type Target struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Met  bool   `json:"met"`
}

// rounds is how many turns each serial ceiling takes.
const rounds = 15

// benchStock is enough that no run sells out.
const benchStock = 1_000_000_000

func measure(ctx context.Context, o options, stderr io.Writer) (*Report, error) {
	say := func(format string, args ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", args...) }
	cfg := loadtest.Config{URL: o.url, Client: loadtest.NewClient(max(o.concurrency, 100))}
	_, settings, err := loadtest.Settings(cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot read the replicas' settings (is the cluster up? make bench starts it): %w", err)
	}
	if settings["work"] != "0s" {
		return nil, fmt.Errorf("the replicas run with -work %s: the ceilings have no business time, so the bench needs -work 0 (make bench starts the cluster so)", settings["work"])
	}
	rep := &Report{Date: time.Now().UTC().Format(time.RFC3339), Machine: machine(), Settings: settings,
		Concurrency: o.concurrency, Seconds: o.duration.Seconds()}

	// Serial ceilings, from this process, on keys of their own.
	opts := func(addr string) *redis.Options {
		return &redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: -1}
	}
	rdb := redis.NewClient(opts(o.redis))
	defer rdb.Close()
	var nodes []redis.UniversalClient
	for _, addr := range o.redlock {
		c := redis.NewClient(opts(strings.TrimSpace(addr)))
		defer c.Close()
		nodes = append(nodes, c)
	}
	svc := sale.New(rdb, sale.Options{Key: "bench:stock", AcquireTimeout: 10 * time.Second})
	if err := svc.SetStock(ctx, benchStock); err != nil {
		return nil, err
	}
	// Every serial ceiling is measured in rounds, the versions taking turns,
	// and each keeps its median: a burst of the machine's other work then
	// lands on one round of every version instead of on one version's
	// whole measurement (a Redis round trip here takes 30-130 us depending
	// on what else runs).
	quiet := slog.New(slog.DiscardHandler)
	deps := versions.Deps{Redis: rdb, Redlock: nodes, LockKey: "bench:lock", TTL: 20 * time.Second,
		Retry: 20 * time.Millisecond, RedlockRetry: 100 * time.Millisecond, Log: quiet}
	notifier := retry.NewNotifier(ctx, rdb, "bench:lock", retry.Backstop, quiet)
	defer notifier.Close()
	type ceiling struct {
		row   int // in rep.Rows; -1: the serial ceiling
		run   func() (float64, error)
		rates []float64
	}
	ceilings := []*ceiling{{row: -1, run: func() (float64, error) { return serialCeiling(ctx, rdb, o.ceilingTime/rounds) }}}
	// Measured: every safe version as it waits by default, then each one
	// that waits differently when notified; the default load test runs
	// every version, then the notified ones again.
	var defaults []Row
	for _, wait := range versions.Waits {
		d := deps
		if wait == "notify" {
			d.Notify = notifier
		}
		methods, _, stop := versions.Build(d)
		defer stop()
		for _, v := range versions.All {
			m := methods[v.Name]
			if wait == "notify" && m.Wait != wait {
				continue
			}
			defaults = append(defaults, Row{Lock: v.Name, Wait: m.Wait})
			if !v.Safe {
				continue
			}
			ceilings = append(ceilings, &ceiling{row: len(rep.Rows), run: func() (float64, error) { return ownCeiling(ctx, svc, m, o.ceilingTime/rounds) }})
			rep.Rows = append(rep.Rows, Row{Lock: v.Name, Wait: m.Wait})
		}
	}
	for range rounds {
		for _, c := range ceilings {
			rate, err := c.run()
			if err != nil {
				name := "serial"
				if c.row >= 0 {
					name = rep.Rows[c.row].Lock + " " + rep.Rows[c.row].Wait
				}
				return nil, fmt.Errorf("%s ceiling: %w", name, err)
			}
			c.rates = append(c.rates, rate)
		}
	}
	for _, c := range ceilings {
		slices.Sort(c.rates)
		median := c.rates[len(c.rates)/2]
		if c.row < 0 {
			rep.Serial = median
			say("serial ceiling (SET NX PX, GET, SET, Lua release): %.0f sales/s (median of %d rounds)", median, rounds)
			continue
		}
		rep.Rows[c.row].Own = median
	}
	for i := range rep.Rows {
		r := &rep.Rows[i]
		r.OwnVsSerial = r.Own / rep.Serial
		say("%s %s own ceiling: %.0f sales/s (%.2f x serial)", r.Lock, r.Wait, r.Own, r.OwnVsSerial)
	}

	// Through nginx.
	healthz, err := loadtest.Sibling(o.url, "healthz")
	if err != nil {
		return nil, err
	}
	plain, err := loadtest.Run(ctx, loadtest.Config{URL: healthz, Plain: true, Requests: 1 << 30, Concurrency: o.concurrency,
		Duration: o.duration, Client: cfg.Client}, "")
	if err != nil {
		return nil, fmt.Errorf("nginx ceiling: %w", err)
	}
	if plain.Failed > 0 {
		return nil, fmt.Errorf("nginx ceiling: %d of %d requests to %s failed", plain.Failed, plain.Requests, healthz)
	}
	rep.Nginx = plain.RequestsPerSec
	say("nginx ceiling (GET /healthz, c=%d): %.0f requests/s", o.concurrency, rep.Nginx)
	for i := range rep.Rows {
		r := &rep.Rows[i]
		res, err := loadtest.Run(ctx, loadtest.Config{URL: o.url, Requests: 1 << 30, Concurrency: o.concurrency, Stock: benchStock,
			Duration: o.duration, Wait: r.Wait, Client: cfg.Client}, r.Lock)
		if err != nil {
			return nil, fmt.Errorf("%s (%s) through nginx: %w", r.Lock, r.Wait, err)
		}
		r.Sales, r.P50, r.P99, r.Failed = res.SalesPerSec, res.Latency.P50, res.Latency.P99, res.Failed
		r.Ratio, r.RatioOf = r.Sales/r.Own, "own"
		if r.Lock == "atomic" {
			r.Ratio, r.RatioOf = r.Sales/rep.Nginx, "nginx"
		}
		say("%s %s through nginx: %.0f sales/s, p99 %.1f ms, %.2f x %s ceiling", r.Lock, r.Wait, r.Sales, r.P99, r.Ratio, r.RatioOf)
	}

	// The default load test: every version, the service's defaults.
	for _, d := range defaults {
		res, err := loadtest.Run(ctx, loadtest.Config{URL: o.url, Requests: 1000, Concurrency: 100, Stock: 100,
			Wait: d.Wait, Client: cfg.Client}, d.Lock)
		if err != nil {
			return nil, fmt.Errorf("%s (%s) default load test: %w", d.Lock, d.Wait, err)
		}
		rep.Default = append(rep.Default, DefaultRun{Lock: d.Lock, Wait: d.Wait, Sold: res.Sold, SoldOut: res.SoldOut,
			Failed: res.Failed, FailedBy: res.FailedBy, Oversold: res.Oversold, P99: res.Latency.P99})
	}
	say("default load test (n=1000, c=100): %d runs", len(rep.Default))

	if rep.MemoryMB, err = replicaMemory(o.runDir); err != nil {
		return nil, err
	}
	return rep, nil
}

// serialCeiling runs the four commands of a locked sale back to back from
// one goroutine for d: SET NX PX (v6's acquire), GET, SET, and v6's Lua
// compare-and-delete release.
func serialCeiling(ctx context.Context, rdb *redis.Client, d time.Duration) (float64, error) {
	lock := lua.New(rdb, "bench:lock", 20*time.Second, 20*time.Millisecond)
	return loop(ctx, d, func() error {
		release, err := lock.Acquire(ctx, "bench")
		if err != nil {
			return err
		}
		v, err := rdb.Get(ctx, "bench:stock").Int64()
		if err != nil {
			return err
		}
		if err := rdb.Set(ctx, "bench:stock", v-1, 0).Err(); err != nil {
			return err
		}
		return release(ctx)
	})
}

// ownCeiling runs m's whole sale (acquire, GET, SET, release) serially for d.
func ownCeiling(ctx context.Context, svc *sale.Service, m sale.Method, d time.Duration) (float64, error) {
	return loop(ctx, d, func() error {
		res, err := svc.Sell(ctx, m)
		if err != nil {
			return err
		}
		return res.ReleaseErr
	})
}

// loop calls f until d has passed and returns the calls completed per second.
func loop(ctx context.Context, d time.Duration, f func() error) (float64, error) {
	start := time.Now()
	n := 0
	for end := start.Add(d); time.Now().Before(end); n++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if err := f(); err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
