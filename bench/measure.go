package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/locklab/locklab/internal/cluster"
	"github.com/locklab/locklab/internal/loadtest"
	"github.com/locklab/locklab/internal/locks/retry"
	lua "github.com/locklab/locklab/internal/locks/v6_lua"
	"github.com/locklab/locklab/internal/redisconn"
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

// bench is one run's state: the cluster, the clients on its Redis, the
// versions built for the serial ceilings, and the report being filled.
type bench struct {
	o       options
	say     func(format string, args ...any)
	client  loadtest.Config // the HTTP client, for every run through nginx
	metrics *http.Client
	reps    []cluster.Proc
	rdb     *redis.Client
	nodes   []redis.UniversalClient
	meter   *holdMeter
	svc     *sale.Service // the own ceilings' sales, on keys bench:*
	rep     *Report
	// sellers[i] runs rep.Rows[i]'s own ceiling for one slice.
	sellers  []func() (float64, error)
	defaults []Row // the default load test's runs
	serials  []float64
}

func measure(ctx context.Context, o options, stderr io.Writer) (*Report, error) {
	b, closeBench, err := newBench(ctx, o, stderr)
	if err != nil {
		return nil, err
	}
	defer closeBench()
	for i := range b.rep.Rows {
		if err := b.row(ctx, i); err != nil {
			return nil, err
		}
	}
	b.rep.Serial = median(b.serials)
	b.say("serial ceiling (SET NX PX, GET, SET, Lua release), all slices: %.0f sales/s", b.rep.Serial)
	if err := b.defaultLoadTests(ctx); err != nil {
		return nil, err
	}
	if b.rep.MemoryMB, err = replicaMemory(b.reps); err != nil {
		return nil, err
	}
	return b.rep, nil
}

// newBench reads the cluster and its settings, connects to its Redis, and
// builds every version (polling and notified) for the own ceilings.
func newBench(ctx context.Context, o options, stderr io.Writer) (*bench, func(), error) {
	b := &bench{o: o, client: loadtest.Config{URL: o.url, Client: loadtest.NewClient(max(o.concurrency, 100))},
		metrics: &http.Client{Timeout: 5 * time.Second}, meter: &holdMeter{}}
	b.say = func(format string, args ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", args...) }
	h, err := loadtest.Health(b.client)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read the replicas' settings (is the cluster up? make bench starts it): %w", err)
	}
	if h.Settings["work"] != "0s" {
		return nil, nil, fmt.Errorf("the replicas run with -work %s: the ceilings have no business time, so the bench needs -work 0 (make bench starts the cluster so)", h.Settings["work"])
	}
	c, err := cluster.Load(o.runDir)
	if err != nil {
		return nil, nil, err
	}
	b.reps = c.State.Replicas
	b.rep = &Report{Date: time.Now().UTC().Format(time.RFC3339), Machine: machine(), Settings: h.Settings,
		Concurrency: o.concurrency, Seconds: o.duration.Seconds()}

	// Serial ceilings, from this process, with the service's client options,
	// on keys of their own.
	b.rdb = redisconn.New(c.State.StockNode().Addr, c.State.RedisPassword)
	var addrs []string
	for _, n := range c.State.Redis {
		addrs = append(addrs, n.Addr)
	}
	b.nodes = redisconn.NewAll(addrs, c.State.RedisPassword)
	notifier := retry.NewNotifier(ctx, b.rdb, "bench:lock", 0, nil)
	closeBench := func() {
		notifier.Close()
		_ = redisconn.CloseAll(b.nodes)
		_ = b.rdb.Close()
	}
	b.svc = sale.New(b.rdb, sale.Options{Key: "bench:stock", Observer: b.meter})
	if err := b.svc.SetStock(ctx, benchStock); err != nil {
		closeBench()
		return nil, nil, err
	}
	b.plan(ctx, versions.Deps{Redis: b.rdb, Redlock: b.nodes, LockKey: "bench:lock", Notifier: notifier})
	return b, closeBench, nil
}

// plan lays out the rows: every safe version as it waits by default, then
// each one that waits differently when notified; the default load test runs
// every version, then the notified ones again.
func (b *bench) plan(ctx context.Context, deps versions.Deps) {
	slice := b.o.ceilingTime / (2 * bracket)
	built := versions.BuildAll(deps, []versions.Variant{{Wait: "poll"}, {Wait: "notify"}})
	for _, wait := range versions.Waits {
		methods := built[versions.Variant{Wait: wait}]
		for _, v := range versions.All {
			m := methods[v.Name]
			if wait == "notify" && m.Wait != wait {
				continue
			}
			b.defaults = append(b.defaults, Row{Lock: v.Name, Wait: m.Wait})
			if !v.Safe || v.OneReplica { // one process's mutex: nothing to set against the cluster's ceilings
				continue
			}
			b.sellers = append(b.sellers, func() (float64, error) { return ownCeiling(ctx, b.svc, m, slice) })
			b.rep.Rows = append(b.rep.Rows, Row{Lock: v.Name, Wait: m.Wait})
		}
	}
}

// row measures rep.Rows[i]: its ceilings, its run through nginx, its ceilings
// again. The ceilings are slices taken right before and right after the run
// (serial and own taking turns), and the row keeps their medians, so a ratio
// compares the run with the machine as it was at that moment: this machine
// is shared, and a Redis round trip swings 30-130 us from one minute to the
// next. atomic's reference, the nginx ceiling, is measured around it the
// same way.
func (b *bench) row(ctx context.Context, i int) error {
	r := &b.rep.Rows[i]
	var own, serial []float64
	b.meter.holds = holds{}
	if err := b.ceilings(ctx, i, &own, &serial); err != nil {
		return err
	}
	held, err := replicaHolds(ctx, b.metrics, b.reps, r.Lock, r.Wait)
	if err != nil {
		return err
	}
	res, err := b.throughNginx(ctx, *r)
	if err != nil {
		return err
	}
	after, err := replicaHolds(ctx, b.metrics, b.reps, r.Lock, r.Wait)
	if err != nil {
		return err
	}
	if err := b.ceilings(ctx, i, &own, &serial); err != nil {
		return err
	}
	r.HoldOwn, r.HoldNginx = b.meter.mean(), after.minus(held).mean()
	r.Own, r.Serial = median(own), median(serial)
	r.OwnVsSerial = r.Own / r.Serial
	b.serials = append(b.serials, serial...)
	r.Sales, r.P50, r.P99, r.Failed = res.SalesPerSec, res.Latency.P50, res.Latency.P99, res.NotServed()
	if r.HoldNginx > 0 && r.Sales > 0 {
		r.Handover = 1e6/r.Sales - r.HoldNginx
	}
	r.Ratio, r.RatioOf = r.Sales/r.Own, "own"
	if r.Lock == "atomic" {
		r.Ratio, r.RatioOf = r.Sales/b.rep.Nginx, "nginx"
	}
	b.say("%s %s: own ceiling %.0f sales/s (%.2f x serial %.0f); through nginx %.0f sales/s, p99 %.1f ms: %.2f x %s ceiling; lock held %.0f us serially, %.0f us through nginx, handed over in %.0f us",
		r.Lock, r.Wait, r.Own, r.OwnVsSerial, r.Serial, r.Sales, r.P99, r.Ratio, r.RatioOf, r.HoldOwn, r.HoldNginx, r.Handover)
	return nil
}

// ceilings takes bracket slices of the serial ceiling and of row i's own,
// taking turns.
func (b *bench) ceilings(ctx context.Context, i int, own, serial *[]float64) error {
	slice := b.o.ceilingTime / (2 * bracket)
	for range bracket {
		s, err := serialCeiling(ctx, b.rdb, slice)
		if err != nil {
			return fmt.Errorf("serial ceiling: %w", err)
		}
		c, err := b.sellers[i]()
		if err != nil {
			return fmt.Errorf("%s %s ceiling: %w", b.rep.Rows[i].Lock, b.rep.Rows[i].Wait, err)
		}
		*serial, *own = append(*serial, s), append(*own, c)
	}
	return nil
}

// throughNginx runs r's version through nginx for the bench's duration, with
// stock that never runs out; around atomic's run it also measures the nginx
// ceiling (half before, half after).
func (b *bench) throughNginx(ctx context.Context, r Row) (loadtest.Result, error) {
	var before loadtest.Result
	if r.Lock == "atomic" {
		var err error
		if before, err = b.nginx(ctx, b.o.duration/2); err != nil {
			return loadtest.Result{}, err
		}
	}
	res, err := loadtest.Run(ctx, loadtest.Config{URL: b.o.url, Requests: 1 << 30, Concurrency: b.o.concurrency, Stock: benchStock,
		Duration: b.o.duration, Wait: r.Wait, Client: b.client.Client, NoCheck: true}, r.Lock)
	if err != nil {
		return res, fmt.Errorf("%s (%s) through nginx: %w", r.Lock, r.Wait, err)
	}
	if r.Lock == "atomic" {
		after, err := b.nginx(ctx, b.o.duration/2)
		if err != nil {
			return res, err
		}
		b.rep.Nginx = float64(before.Requests+after.Requests) / (before.Seconds + after.Seconds)
		b.say("nginx ceiling (GET /healthz, c=%d, before and after atomic): %.0f requests/s", b.o.concurrency, b.rep.Nginx)
	}
	return res, nil
}

// nginx is the nginx ceiling: GET /healthz through nginx for d.
func (b *bench) nginx(ctx context.Context, d time.Duration) (loadtest.Result, error) {
	healthz, err := loadtest.Sibling(b.o.url, "healthz")
	if err != nil {
		return loadtest.Result{}, err
	}
	res, err := loadtest.Run(ctx, loadtest.Config{URL: healthz, Plain: true, Requests: 1 << 30, Concurrency: b.o.concurrency,
		Duration: d, Client: b.client.Client}, "")
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
			Wait: d.Wait, Client: b.client.Client, NoCheck: true}, d.Lock)
		if err != nil {
			return fmt.Errorf("%s (%s) default load test: %w", d.Lock, d.Wait, err)
		}
		b.rep.Default = append(b.rep.Default, DefaultRun{Lock: d.Lock, Wait: d.Wait, Sold: res.Sold, SoldOut: res.SoldOut,
			Failed: res.NotServed(), FailedBy: res.FailedBy, Oversold: res.Oversold, P99: res.Latency.P99})
	}
	b.say("default load test (n=1000, c=100): %d runs", len(b.rep.Default))
	return nil
}

// serialCeiling runs the four commands of a locked sale back to back from
// one goroutine for d: SET NX PX (v6's acquire), GET, SET, and v6's Lua
// compare-and-delete release.
func serialCeiling(ctx context.Context, rdb *redis.Client, d time.Duration) (float64, error) {
	lock := lua.New(rdb, lua.Options{Key: "bench:lock"})
	return loop(ctx, d, func() error {
		l, err := lock.TryAcquire(ctx, "bench")
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
		return l.Release(ctx)
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
