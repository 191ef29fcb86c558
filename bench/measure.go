package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
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
	// release from one goroutine; the median of every row's slices. No
	// single-lock design sells faster serially.
	Serial float64 `json:"serial_ceiling_per_sec"`
	// Nginx is GET /healthz through nginx: the HTTP path's ceiling,
	// measured before and after atomic's run.
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
	// Own is its own ceiling: acquire, sale, release, serially, no HTTP;
	// Serial the four-command loop's; both measured around this row's run.
	Own         float64 `json:"own_ceiling_per_sec"`
	Serial      float64 `json:"serial_ceiling_per_sec"`
	OwnVsSerial float64 `json:"own_vs_serial"`
	// Through nginx, -c concurrent sales.
	Sales  float64 `json:"sales_per_sec"`
	P50    float64 `json:"p50_ms"`
	P99    float64 `json:"p99_ms"`
	Failed int     `json:"failed"`
	// HoldOwn and HoldNginx are the mean time one sale held the lock, in
	// microseconds: in the own ceiling, and through nginx (from the
	// replicas' locklab_lock_hold_seconds). Their quotient is most of the
	// ratio: a locked sale can go no faster than one hold at a time.
	HoldOwn   float64 `json:"hold_own_us,omitempty"`
	HoldNginx float64 `json:"hold_nginx_us,omitempty"`
	// Handover is the rest of each sale's share of the time through nginx
	// (1/Sales - HoldNginx): the lock passing from one holder to the next,
	// which polling pays with the wait for the next waiter's attempt.
	Handover float64 `json:"handover_us,omitempty"`
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

// bracket is how many slices of each ceiling a row takes before its run
// through nginx, and again after it.
const bracket = 4

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
	reps, err := localReplicas(o.runDir)
	if err != nil {
		return nil, err
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
	meter := &holdMeter{}
	svc := sale.New(rdb, sale.Options{Key: "bench:stock", AcquireTimeout: 10 * time.Second, Observer: meter})
	metricsClient := &http.Client{Timeout: 5 * time.Second}
	if err := svc.SetStock(ctx, benchStock); err != nil {
		return nil, err
	}
	quiet := slog.New(slog.DiscardHandler)
	deps := versions.Deps{Redis: rdb, Redlock: nodes, LockKey: "bench:lock", TTL: 20 * time.Second,
		Retry: 20 * time.Millisecond, RedlockRetry: 100 * time.Millisecond, Log: quiet}
	notifier := retry.NewNotifier(ctx, rdb, "bench:lock", retry.Backstop, quiet)
	defer notifier.Close()
	// Measured: every safe version as it waits by default, then each one
	// that waits differently when notified; the default load test runs
	// every version, then the notified ones again.
	var (
		defaults []Row
		sellers  []func() (float64, error) // each row's own ceiling, one slice
	)
	slice := o.ceilingTime / (2 * bracket)
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
			sellers = append(sellers, func() (float64, error) { return ownCeiling(ctx, svc, m, slice) })
			rep.Rows = append(rep.Rows, Row{Lock: v.Name, Wait: m.Wait})
		}
	}
	healthz, err := loadtest.Sibling(o.url, "healthz")
	if err != nil {
		return nil, err
	}
	nginx := func(d time.Duration) (loadtest.Result, error) {
		res, err := loadtest.Run(ctx, loadtest.Config{URL: healthz, Plain: true, Requests: 1 << 30, Concurrency: o.concurrency,
			Duration: d, Client: cfg.Client}, "")
		if err == nil && res.Failed > 0 {
			err = fmt.Errorf("%d of %d requests to %s failed", res.Failed, res.Requests, healthz)
		}
		if err != nil {
			return res, fmt.Errorf("nginx ceiling: %w", err)
		}
		return res, nil
	}

	// Each row: its ceilings, its run through nginx, its ceilings again.
	// The ceilings are slices taken right before and right after the run
	// (serial and own taking turns), and the row keeps their medians, so a
	// ratio compares the run with the machine as it was at that moment:
	// this machine is shared, and a Redis round trip swings 30-130 us from
	// one minute to the next. atomic's reference, the nginx ceiling, is
	// measured around it the same way.
	var serials []float64
	for i := range rep.Rows {
		r := &rep.Rows[i]
		var own, serial []float64
		ceilings := func() error {
			for range bracket {
				s, err := serialCeiling(ctx, rdb, slice)
				if err != nil {
					return fmt.Errorf("serial ceiling: %w", err)
				}
				c, err := sellers[i]()
				if err != nil {
					return fmt.Errorf("%s %s ceiling: %w", r.Lock, r.Wait, err)
				}
				serial, own = append(serial, s), append(own, c)
			}
			return nil
		}
		meter.holds = holds{}
		if err := ceilings(); err != nil {
			return nil, err
		}
		held, err := replicaHolds(ctx, metricsClient, reps, r.Lock, r.Wait)
		if err != nil {
			return nil, err
		}
		var before loadtest.Result
		if r.Lock == "atomic" {
			if before, err = nginx(o.duration / 2); err != nil {
				return nil, err
			}
		}
		res, err := loadtest.Run(ctx, loadtest.Config{URL: o.url, Requests: 1 << 30, Concurrency: o.concurrency, Stock: benchStock,
			Duration: o.duration, Wait: r.Wait, Client: cfg.Client}, r.Lock)
		if err != nil {
			return nil, fmt.Errorf("%s (%s) through nginx: %w", r.Lock, r.Wait, err)
		}
		if r.Lock == "atomic" {
			after, err := nginx(o.duration / 2)
			if err != nil {
				return nil, err
			}
			rep.Nginx = float64(before.Requests+after.Requests) / (before.Seconds + after.Seconds)
			say("nginx ceiling (GET /healthz, c=%d, before and after atomic): %.0f requests/s", o.concurrency, rep.Nginx)
		}
		after, err := replicaHolds(ctx, metricsClient, reps, r.Lock, r.Wait)
		if err != nil {
			return nil, err
		}
		if err := ceilings(); err != nil {
			return nil, err
		}
		r.HoldOwn, r.HoldNginx = meter.mean(), after.minus(held).mean()
		r.Own, r.Serial = median(own), median(serial)
		r.OwnVsSerial = r.Own / r.Serial
		serials = append(serials, serial...)
		r.Sales, r.P50, r.P99, r.Failed = res.SalesPerSec, res.Latency.P50, res.Latency.P99, res.Failed
		if r.HoldNginx > 0 && r.Sales > 0 {
			r.Handover = 1e6/r.Sales - r.HoldNginx
		}
		r.Ratio, r.RatioOf = r.Sales/r.Own, "own"
		if r.Lock == "atomic" {
			r.Ratio, r.RatioOf = r.Sales/rep.Nginx, "nginx"
		}
		say("%s %s: own ceiling %.0f sales/s (%.2f x serial %.0f); through nginx %.0f sales/s, p99 %.1f ms: %.2f x %s ceiling; lock held %.0f us serially, %.0f us through nginx, handed over in %.0f us",
			r.Lock, r.Wait, r.Own, r.OwnVsSerial, r.Serial, r.Sales, r.P99, r.Ratio, r.RatioOf, r.HoldOwn, r.HoldNginx, r.Handover)
	}
	rep.Serial = median(serials)
	say("serial ceiling (SET NX PX, GET, SET, Lua release), all slices: %.0f sales/s", rep.Serial)

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

	if rep.MemoryMB, err = replicaMemory(reps); err != nil {
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

// median of xs (sorted in place).
func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
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
