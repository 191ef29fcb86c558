package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/builder"
	"github.com/locklab/locklab/internal/client"
	"github.com/locklab/locklab/internal/cluster"
	"github.com/locklab/locklab/internal/loadtest"
	dblock "github.com/locklab/locklab/internal/locks/db"
	"github.com/locklab/locklab/internal/locks/etcd"
	"github.com/locklab/locklab/internal/locks/retry"
	zklock "github.com/locklab/locklab/internal/locks/zk"
	"github.com/locklab/locklab/internal/redisconn"
	"github.com/locklab/locklab/internal/sale"
	"github.com/locklab/locklab/internal/versions"
	"github.com/redis/go-redis/v9"
)

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
	service *client.Client // the service through nginx, for every run
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
	for _, i := range b.measureOrder() {
		if err := b.row(ctx, i); err != nil {
			return nil, err
		}
	}
	b.rep.Serial = median(b.serials)
	b.say("serial ceiling (SET NX PX, GET, SET, Lua release), all slices: %.0f sales/s", b.rep.Serial)
	if b.rep.Gate, err = gateCost(ctx, b.rdb); err != nil {
		return nil, fmt.Errorf("the step gate's cost: %w", err)
	}
	b.say("%s", gateLine(b.rep.Gate))
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
	service, err := client.ForSale(o.url, "")
	if err != nil {
		return nil, nil, err
	}
	b := &bench{o: o, service: service, meter: &holdMeter{}}
	b.say = func(format string, args ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", args...) }
	h, err := service.Health(ctx)
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
	// The database's two pools, as the service opens them: the polling
	// locks' and db-getlock's, which holds a connection for each hold.
	var dbc, holds *sql.DB
	if c.State.DB != nil {
		if dbc, err = dblock.Open(c.State.DSN()); err != nil {
			_ = ecli.Close()
			return nil, nil, err
		}
		if holds, err = dblock.OpenHolds(c.State.DSN()); err != nil {
			_ = ecli.Close()
			_ = dbc.Close()
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
				_ = holds.Close()
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
			_ = holds.Close()
		}
		_ = redisconn.CloseAll(b.nodes)
		_ = b.rdb.Close()
	}
	b.svc = sale.New(b.rdb, sale.Options{Key: "bench:stock", Observer: b.meter})
	if err := b.svc.SetStock(ctx, benchStock); err != nil {
		closeBench()
		return nil, nil, err
	}
	b.plan(ctx, builder.Deps{Redis: b.rdb, Redlock: b.nodes, Etcd: ecli, DB: dbc, DBHolds: holds, ZK: zks, LockKey: "bench:lock", Notifier: notifier})
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
func (b *bench) plan(ctx context.Context, deps builder.Deps) {
	slice := b.o.ceilingTime / (2 * bracket)
	var variants []versions.Variant
	for _, wait := range versions.Waits {
		variants = append(variants, versions.Variant{Wait: wait})
	}
	built := builder.BuildAll(deps, variants)
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

// measureOrder is the order the rows are measured in: a version's waits one
// after the other (v3 polled, notified, handed off, then v4's, ...), where
// the table lists them by wait. A hand-off row's p99 is judged against its
// version's polling row's, and this machine's speed drifts from one minute to
// the next: measured by wait, the two rows of a version were about 8
// minutes apart (21 rows of about 22 s between them, 2026-11-29).
func (b *bench) measureOrder() []int {
	rank := make(map[string]int, len(versions.All))
	for i, v := range versions.All {
		rank[v.Name] = i
	}
	order := make([]int, len(b.rep.Rows))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(x, y int) int { return rank[b.rep.Rows[x].Lock] - rank[b.rep.Rows[y].Lock] })
	return order
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
	var sales, p50s, p99s, rtts []float64
	sold := 0
	for round := range b.o.rounds {
		start, err := b.counts(ctx, *r)
		if err != nil {
			return err
		}
		res, reference, rtt, err := b.throughNginx(ctx, *r)
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
		if rtt > 0 {
			rtts = append(rtts, rtt)
		}
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
	if len(rtts) > 0 {
		r.RoundTrip = median(rtts)
	}
	if r.HoldNginx > 0 && r.Sales > 0 {
		r.Handover = 1e6/r.Sales - r.HoldNginx
		r.Busy, r.Bound = r.HoldNginx*r.Sales/1e6, 1e6/r.HoldNginx/r.Own
	}
	if err := b.curve(ctx, r); err != nil {
		return err
	}
	r.Ratio, r.RatioOf = median(slices.Clone(r.Rounds)), refName(r.Lock)
	r.RatioMin, r.RatioMax = slices.Min(r.Rounds), slices.Max(r.Rounds)
	b.say("%s %s: own ceiling %.0f sales/s (%.2f x serial %.0f); through nginx %.0f sales/s, p99 %.1f ms: %.2f x %s ceiling (rounds %.2f-%.2f); lock held %.0f us serially, %.0f us through nginx, handed over in %.0f us, a Redis round trip %.0f us meanwhile (lock busy %.2f of the time; with no hand-over the ratio could reach %.2f); per sale %.1f round trips to Redis, %.1f commands run in it, %.1f lock attempts",
		r.Lock, r.Wait, r.Own, r.OwnVsSerial, r.Serial, r.Sales, r.P99, r.Ratio, r.RatioOf, r.RatioMin, r.RatioMax, r.HoldOwn, r.HoldNginx, r.Handover, r.RoundTrip, r.Busy, r.Bound,
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
			Concurrency: b.o.concurrency, Rate: rate, Stock: benchStock, Wait: r.query(), Client: b.service, NoCheck: true}, r.Lock)
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
	if c.held, err = replicaHolds(ctx, b.service, b.reps, holdMetric, r.Lock, r.Wait); err != nil {
		return c, err
	}
	if c.tried, err = replicaHolds(ctx, b.service, b.reps, attemptsMetric, r.Lock, r.Wait); err != nil {
		return c, err
	}
	if c.commands, err = commands(ctx, b.nodes); err != nil {
		return c, err
	}
	c.trips, err = replicaCounter(ctx, b.service, b.reps, roundTripsMetric)
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
