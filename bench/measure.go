package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/cluster"
	"github.com/locklab/locklab/internal/loadtest"
	dblock "github.com/locklab/locklab/internal/locks/db"
	"github.com/locklab/locklab/internal/locks/etcd"
	"github.com/locklab/locklab/internal/locks/retry"
	lua "github.com/locklab/locklab/internal/locks/v6_lua"
	zklock "github.com/locklab/locklab/internal/locks/zk"
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
	Compare  *Comparison        `json:"libraries,omitempty"`
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
	// Through nginx, -c concurrent sales: the medians of the rounds.
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
	// Busy is the share of the time through nginx that the lock was held
	// (HoldNginx x Sales): what a wait controls, since the rest is the
	// hand-over. Bound is the most Ratio could be with no hand-over at all
	// (1/HoldNginx over Own): what the hold through nginx allows.
	Busy  float64 `json:"lock_busy,omitempty"`
	Bound float64 `json:"ratio_bound,omitempty"`
	// Ratio is Sales over Own (over the nginx ceiling for atomic, which has
	// no lock to serialise on): the median of Rounds, each round's run over its ceiling
	// (own, or nginx's for atomic) measured just before and just after it;
	// RatioMin and RatioMax are their spread.
	Ratio    float64   `json:"ratio"`
	RatioOf  string    `json:"ratio_of"`
	Rounds   []float64 `json:"ratio_rounds"`
	RatioMin float64   `json:"ratio_min"`
	RatioMax float64   `json:"ratio_max"`
	// CommandsPerSale is the Redis commands every node the bench uses ran
	// during the run through nginx (INFO commandstats, before and after),
	// per sale; AttemptsPerSale the lock attempts per acquisition (the
	// replicas' locklab_lock_acquire_attempts). Neither depends on how busy
	// the machine is: they compare across machines and runs.
	CommandsPerSale float64 `json:"commands_per_sale"`
	AttemptsPerSale float64 `json:"attempts_per_sale,omitempty"`
	// RoundTripsPerSale counts what the replicas sent instead (their
	// locklab_redis_round_trips_total): a script is one round trip, where
	// CommandsPerSale also counts every command it ran inside Redis.
	RoundTripsPerSale float64 `json:"round_trips_per_sale"`
	// Load is the latency curve: p50 and p99 at a few offered loads, in an
	// open model (latency counted from each request's due time).
	Load []LoadPoint `json:"latency_vs_load,omitempty"`
}

// LoadPoint is one offered load of a row's latency curve.
type LoadPoint struct {
	Offered  float64 `json:"offered_per_sec"`
	Achieved float64 `json:"sales_per_sec"`
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	Failed   int     `json:"failed"`
}

// loadShares are the offered loads of a latency curve, as shares of the
// row's closed-loop sales/s.
var loadShares = []float64{0.25, 0.5, 0.75, 1}

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
	// nginxRounds are the nginx ceilings measured around atomic's runs.
	nginxRounds []float64
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
	if err := b.compare(ctx); err != nil {
		return nil, err
	}
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
	var members []string
	for _, m := range c.State.Etcd {
		members = append(members, m.Addr)
	}
	ecli, err := etcd.Dial(members)
	if err != nil {
		return nil, nil, err
	}
	var dbc *sql.DB
	if c.State.DB != nil {
		if dbc, err = dblock.Open(c.State.DSN()); err != nil {
			_ = ecli.Close()
			return nil, nil, err
		}
	}
	var zks *zklock.Session
	if len(c.State.ZK) > 0 {
		var servers []string
		for _, m := range c.State.ZK {
			servers = append(servers, m.Addr)
		}
		if zks, err = zklock.Dial(servers, zklock.SessionOptions{Timeout: 20 * time.Second}); err != nil {
			_ = ecli.Close()
			if dbc != nil {
				_ = dbc.Close()
			}
			return nil, nil, err
		}
	}
	notifier := retry.NewNotifier(ctx, b.rdb, "bench:lock", 0, 0, nil)
	closeBench := func() {
		notifier.Close()
		if zks != nil {
			zks.Close()
		}
		_ = ecli.Close()
		if dbc != nil {
			_ = dbc.Close()
		}
		_ = redisconn.CloseAll(b.nodes)
		_ = b.rdb.Close()
	}
	b.svc = sale.New(b.rdb, sale.Options{Key: "bench:stock", Observer: b.meter})
	if err := b.svc.SetStock(ctx, benchStock); err != nil {
		closeBench()
		return nil, nil, err
	}
	b.plan(ctx, versions.Deps{Redis: b.rdb, Redlock: b.nodes, Etcd: ecli, DB: dbc, ZK: zks, LockKey: "bench:lock", Notifier: notifier})
	b.planComparison()
	return b, closeBench, nil
}

// query is the row's wait as /sale?wait= takes it: one of versions.Waits,
// or none for a version that waits its own way (etcd's watch).
func (r Row) query() string {
	if slices.Contains(versions.Waits, r.Wait) {
		return r.Wait
	}
	return ""
}

// plan lays out the rows: every safe version as it waits by default (poll),
// then each one that waits otherwise when notified, then handed off; the
// default load test runs every version, then v3-v8 notified and handed off.
func (b *bench) plan(ctx context.Context, deps versions.Deps) {
	slice := b.o.ceilingTime / (2 * bracket)
	var variants []versions.Variant
	for _, wait := range versions.Waits {
		variants = append(variants, versions.Variant{Wait: wait})
	}
	built := versions.BuildAll(deps, variants)
	for _, wait := range versions.Waits {
		methods := built[versions.Variant{Wait: wait}]
		for _, v := range versions.All {
			m := methods[v.Name]
			if wait != "poll" && m.Wait != wait || b.o.locks != nil && !slices.Contains(b.o.locks, v.Name) {
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

// row measures rep.Rows[i] in rounds: its ceilings, a run through nginx,
// its ceilings again, a run, ... (-rounds runs), so that each run sits between
// two measurements of the machine as it was around it: this machine is
// shared, and a Redis round trip swings 30-130 us from one minute to the
// next. Each round's ratio is its run over the median of the ceiling slices
// just before and just after it; the row's ratio is the median of the
// rounds', printed with their spread. atomic's reference, the nginx ceiling,
// is measured around each of its runs the same way. The Redis commands and
// lock attempts per sale are totals over every round.
func (b *bench) row(ctx context.Context, i int) error {
	r := &b.rep.Rows[i]
	var own, serial []float64
	b.meter.holds = holds{}
	before, err := b.ceilings(ctx, i, &own, &serial)
	if err != nil {
		return err
	}
	var total counters
	var sales, p50s, p99s []float64
	sold := 0
	for round := range b.o.rounds {
		start, err := b.counts(ctx, *r)
		if err != nil {
			return err
		}
		res, reference, err := b.throughNginx(ctx, *r)
		if err != nil {
			return err
		}
		end, err := b.counts(ctx, *r)
		if err != nil {
			return err
		}
		total = total.plus(end.minus(start))
		after, err := b.ceilings(ctx, i, &own, &serial)
		if err != nil {
			return err
		}
		if r.Lock != "atomic" {
			reference = median(append(before, after...))
		}
		before = after
		sales, p50s, p99s = append(sales, res.SalesPerSec), append(p50s, res.Latency.P50), append(p99s, res.Latency.P99)
		r.Rounds = append(r.Rounds, res.SalesPerSec/reference)
		sold, r.Failed = sold+res.Sold, r.Failed+res.NotServed()
		b.say("%s %s round %d: %.0f sales/s through nginx, %.2f x its %s ceiling (%.0f)", r.Lock, r.Wait, round+1, res.SalesPerSec,
			res.SalesPerSec/reference, refName(r.Lock), reference)
	}
	if sold > 0 {
		r.CommandsPerSale = float64(total.commands) / float64(sold)
		r.RoundTripsPerSale = total.trips / float64(sold)
	}
	if total.tried.count > 0 {
		r.AttemptsPerSale = total.tried.seconds / float64(total.tried.count)
	}
	r.HoldOwn, r.HoldNginx = b.meter.mean(), total.held.mean()
	r.Own, r.Serial = median(own), median(serial)
	r.OwnVsSerial = r.Own / r.Serial
	b.serials = append(b.serials, serial...)
	r.Sales, r.P50, r.P99 = median(sales), median(p50s), median(p99s)
	if r.HoldNginx > 0 && r.Sales > 0 {
		r.Handover = 1e6/r.Sales - r.HoldNginx
		r.Busy, r.Bound = r.HoldNginx*r.Sales/1e6, 1e6/r.HoldNginx/r.Own
	}
	if err := b.curve(ctx, r); err != nil {
		return err
	}
	r.Ratio, r.RatioOf = median(slices.Clone(r.Rounds)), refName(r.Lock)
	r.RatioMin, r.RatioMax = slices.Min(r.Rounds), slices.Max(r.Rounds)
	b.say("%s %s: own ceiling %.0f sales/s (%.2f x serial %.0f); through nginx %.0f sales/s, p99 %.1f ms: %.2f x %s ceiling (rounds %.2f-%.2f); lock held %.0f us serially, %.0f us through nginx, handed over in %.0f us (lock busy %.2f of the time; with no hand-over the ratio could reach %.2f); per sale %.1f round trips to Redis, %.1f commands run in it, %.1f lock attempts",
		r.Lock, r.Wait, r.Own, r.OwnVsSerial, r.Serial, r.Sales, r.P99, r.Ratio, r.RatioOf, r.RatioMin, r.RatioMax, r.HoldOwn, r.HoldNginx, r.Handover, r.Busy, r.Bound,
		r.RoundTripsPerSale, r.CommandsPerSale, r.AttemptsPerSale)
	return nil
}

// curve measures r's latency at each of loadShares of its closed-loop
// sales/s, each for -load-duration, at most -c in flight. A request that
// fails is counted (and fails the row), as in the closed-loop rounds.
func (b *bench) curve(ctx context.Context, r *Row) error {
	if b.o.loadTime <= 0 {
		return nil
	}
	for _, share := range loadShares {
		rate := share * r.Sales
		res, err := loadtest.Run(ctx, loadtest.Config{URL: b.o.url, Requests: max(1, int(rate*b.o.loadTime.Seconds())),
			Concurrency: b.o.concurrency, Rate: rate, Stock: benchStock, Wait: r.query(), Client: b.client.Client, NoCheck: true}, r.Lock)
		if err != nil {
			return fmt.Errorf("%s (%s) at %.0f/s: %w", r.Lock, r.Wait, rate, err)
		}
		r.Load = append(r.Load, LoadPoint{Offered: rate, Achieved: res.SalesPerSec, P50: res.Latency.P50, P99: res.Latency.P99, Failed: res.NotServed()})
		r.Failed += res.NotServed()
	}
	b.say("%s %s latency at %s", r.Lock, r.Wait, curveText(r.Load))
	return nil
}

func curveText(points []LoadPoint) string {
	var parts []string
	for _, p := range points {
		parts = append(parts, fmt.Sprintf("%.0f/s: p50 %.1f ms, p99 %.1f ms", p.Offered, p.P50, p.P99))
	}
	return strings.Join(parts, "; ")
}

// counters are what the replicas and the Redis nodes have counted so far
// for one row: read just before and just after each of its runs through
// nginx (not around its ceilings, which run commands of their own), the
// difference is the run's.
type counters struct {
	held, tried holds // lock hold time, and lock attempts, per acquisition
	commands    int64 // commands run in Redis, every node
	trips       float64
}

func (c counters) minus(o counters) counters {
	return counters{c.held.minus(o.held), c.tried.minus(o.tried), c.commands - o.commands, c.trips - o.trips}
}

func (c counters) plus(o counters) counters {
	return counters{c.held.plus(o.held), c.tried.plus(o.tried), c.commands + o.commands, c.trips + o.trips}
}

func (b *bench) counts(ctx context.Context, r Row) (counters, error) {
	var c counters
	var err error
	if c.held, err = replicaHolds(ctx, b.metrics, b.reps, holdMetric, r.Lock, r.Wait); err != nil {
		return c, err
	}
	if c.tried, err = replicaHolds(ctx, b.metrics, b.reps, attemptsMetric, r.Lock, r.Wait); err != nil {
		return c, err
	}
	if c.commands, err = commands(ctx, b.nodes); err != nil {
		return c, err
	}
	c.trips, err = replicaCounter(ctx, b.metrics, b.reps, roundTripsMetric)
	return c, err
}

// refName is the ceiling a row's ratio is taken against: its own, but for
// atomic, which has no lock to serialise on, nginx's.
func refName(lock string) string {
	if lock == "atomic" {
		return "nginx"
	}
	return "own"
}

// ceilings takes bracket slices of the serial ceiling and of row i's own,
// taking turns, appends them to serial and own, and returns this set's own
// slices.
func (b *bench) ceilings(ctx context.Context, i int, own, serial *[]float64) ([]float64, error) {
	slice := b.o.ceilingTime / (2 * bracket)
	var set []float64
	for range bracket {
		s, err := serialCeiling(ctx, b.rdb, slice)
		if err != nil {
			return nil, fmt.Errorf("serial ceiling: %w", err)
		}
		c, err := b.sellers[i]()
		if err != nil {
			return nil, fmt.Errorf("%s %s ceiling: %w", b.rep.Rows[i].Lock, b.rep.Rows[i].Wait, err)
		}
		*serial, *own, set = append(*serial, s), append(*own, c), append(set, c)
	}
	return set, nil
}

// throughNginx runs r's version through nginx for the bench's duration, with
// stock that never runs out; around atomic's run it also measures the nginx
// ceiling (half before, half after) and returns it (0 for the others).
func (b *bench) throughNginx(ctx context.Context, r Row) (loadtest.Result, float64, error) {
	var before loadtest.Result
	if r.Lock == "atomic" {
		var err error
		if before, err = b.nginx(ctx, b.o.duration/2); err != nil {
			return loadtest.Result{}, 0, err
		}
	}
	res, err := loadtest.Run(ctx, loadtest.Config{URL: b.o.url, Requests: 1 << 30, Concurrency: b.o.concurrency, Stock: benchStock,
		Duration: b.o.duration, Wait: r.query(), Client: b.client.Client, NoCheck: true}, r.Lock)
	if err != nil {
		return res, 0, fmt.Errorf("%s (%s) through nginx: %w", r.Lock, r.Wait, err)
	}
	if r.Lock != "atomic" {
		return res, 0, nil
	}
	after, err := b.nginx(ctx, b.o.duration/2)
	if err != nil {
		return res, 0, err
	}
	ceiling := float64(before.Requests+after.Requests) / (before.Seconds + after.Seconds)
	b.nginxRounds = append(b.nginxRounds, ceiling)
	b.rep.Nginx = median(slices.Clone(b.nginxRounds))
	b.say("nginx ceiling (GET /healthz, c=%d, before and after atomic): %.0f requests/s", b.o.concurrency, ceiling)
	return res, ceiling, nil
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
			Wait: d.query(), Client: b.client.Client, NoCheck: true}, d.Lock)
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

// commands is how many commands the nodes have run since they started: the
// calls of every command in INFO commandstats, but INFO's own (the bench's
// reading would count itself).
func commands(ctx context.Context, nodes []redis.UniversalClient) (int64, error) {
	var total int64
	for _, n := range nodes {
		info, err := n.Info(ctx, "commandstats").Result()
		if err != nil {
			return 0, fmt.Errorf("INFO commandstats: %w", err)
		}
		total += commandCalls(info)
	}
	return total, nil
}

// commandCalls sums the calls= of every cmdstat_ line of an INFO
// commandstats reply, less cmdstat_info's.
func commandCalls(info string) int64 {
	var total int64
	for line := range strings.SplitSeq(info, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(stats, "calls="), ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err == nil {
			total += n
		}
	}
	return total
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
