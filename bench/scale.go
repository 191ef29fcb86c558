package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/cli"
	"github.com/locklab/locklab/internal/client"
	"github.com/locklab/locklab/internal/cluster"
	"github.com/locklab/locklab/internal/docgen"
	"github.com/locklab/locklab/internal/loadtest"
	"github.com/locklab/locklab/internal/redisconn"
)

// The scaling curve (issue 29, make bench-scale): how a version's cost
// grows with replicas and with waiters. Commands run in Redis per sale are
// the figure that does not depend on the machine: a hand-off sale should
// cost the same whatever the number of waiters (O(1)), where a polled one
// pays for every waiter's attempts.

// scaleRows are the versions on the curve, each as it waits.
var scaleRows = []Row{
	{Lock: "none"}, {Lock: "v6", Wait: "poll"}, {Lock: "v6", Wait: "notify"}, {Lock: "v6", Wait: "handoff"},
	{Lock: "redlock", Wait: "poll"}, {Lock: "etcd", Wait: "watch"}, {Lock: "atomic"},
}

// The O(1) goal: a hand-off sale's commands at the most waiters over its
// commands at flatFrom waiters (both contended: below that the lock is
// often free and a sale skips the queue) stay within flatGrowth.
const (
	flatFrom   = 16
	flatGrowth = 1.25
	// busyIdle: a point during which the machine's CPUs were idle less
	// than this share of the time was limited by the machine (2 cores for
	// nginx, the replicas, the Redis nodes and the load), not the lock.
	busyIdle = 0.05
)

// Scale is one run of the curve, as written to JSON.
type Scale struct {
	Date    string       `json:"date"`
	Machine string       `json:"machine"`
	Seconds float64      `json:"seconds_per_point"`
	Points  []ScalePoint `json:"points"`
	Goals   []Target     `json:"goals"`
}

// ScalePoint is one version at one number of replicas and one concurrency.
type ScalePoint struct {
	Replicas    int     `json:"replicas"`
	Concurrency int     `json:"concurrency"`
	Lock        string  `json:"lock"`
	Wait        string  `json:"wait,omitempty"`
	Sales       float64 `json:"sales_per_sec"`
	P50         float64 `json:"p50_ms"`
	P99         float64 `json:"p99_ms"`
	Failed      int     `json:"failed"`
	// Per sale: commands run in Redis (every node, INFO commandstats) and
	// round trips the replicas made to it.
	CommandsPerSale   float64 `json:"commands_per_sale"`
	RoundTripsPerSale float64 `json:"round_trips_per_sale"`
	// Idle is the share of the machine's CPU time idle during the point
	// (/proc/stat): below busyIdle, the machine was the limit.
	Idle float64 `json:"cpu_idle"`
}

// Label names the point's version as the tables do.
func (p ScalePoint) Label() string { return strings.TrimSpace(p.Lock + " " + p.Wait) }

// MachineBound says that the machine, not the version, limited the point.
func (p ScalePoint) MachineBound() bool { return p.Idle < busyIdle }

type scaleOptions struct {
	root, runDir        string
	port                int
	replicas, conc      []int
	duration            time.Duration
	jsonOut, chart, doc string
	// from re-renders an earlier run's JSON (the tables, the chart, the
	// goals) without measuring.
	from string
}

func parseScale(args []string, stderr io.Writer) (o scaleOptions, err error) {
	fs := cli.FlagSet("bench scale", "Usage: go run ./bench scale [flags]\n\nThe scaling curve: starts the local cluster (-work 0) at each number of replicas in turn, runs none, v6 (poll, notify, handoff), redlock, etcd and atomic at each concurrency, and says how sales/s, p99 and the Redis commands and round trips per sale grow (make bench-scale does it all).", stderr)
	fs.StringVar(&o.runDir, "run-dir", ".run", "the local cluster's run directory (no cluster may be up in it: each number of replicas gets its own, started and stopped here)")
	fs.IntVar(&o.port, "port", 80, "nginx's port for the clusters started")
	fs.DurationVar(&o.duration, "duration", 1500*time.Millisecond, "how long each point runs")
	fs.StringVar(&o.jsonOut, "json", "bench-scale.json", "write the points here as JSON (empty: do not)")
	fs.StringVar(&o.chart, "chart", "", "write the charts here, as SVG (empty: do not)")
	fs.StringVar(&o.doc, "doc", "", "also write the table into this Markdown file's generated section (bench-scale: docs/performance.md)")
	fs.StringVar(&o.from, "from", "", "measure nothing: read an earlier run's JSON and write it (its goals checked again), its tables, chart and doc section again")
	replicas, conc := "1,2,4,8", "1,4,16,64,256"
	fs.StringVar(&replicas, "replicas", replicas, "the numbers of replicas, comma-separated")
	fs.StringVar(&conc, "c", conc, "the concurrencies, comma-separated")
	if err := cli.Parse(fs, args, 0); err != nil {
		return o, err
	}
	if o.replicas, err = ints(replicas); err == nil {
		o.conc, err = ints(conc)
	}
	if err != nil || o.duration <= 0 || o.port < 1 || o.port > 65535 {
		return o, cli.UsageError(stderr, "bench scale", "want -replicas and -c as positive integers, comma-separated (%v), -duration > 0 and -port 1-65535", err)
	}
	o.root = "."
	return o, nil
}

// ints parses "1,2,4": positive integers, in increasing order.
func ints(list string) ([]int, error) {
	var out []int
	for s := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", s)
		}
		out = append(out, n)
	}
	if !slices.IsSorted(out) {
		return nil, fmt.Errorf("%q is not in increasing order", list)
	}
	return out, nil
}

func runScale(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseScale(args, stderr)
	if err != nil {
		return cli.Status(err)
	}
	s := &Scale{Date: time.Now().UTC().Format(time.RFC3339), Machine: machine(), Seconds: o.duration.Seconds()}
	if o.from != "" {
		raw, err := os.ReadFile(o.from)
		if err == nil {
			err = json.Unmarshal(raw, s)
		}
		if err != nil {
			fmt.Fprintln(stderr, "bench scale: -from:", err)
			return 1
		}
	}
	for _, n := range o.replicas {
		if o.from != "" {
			break
		}
		if err := s.measure(ctx, o, n, stderr); err != nil {
			fmt.Fprintln(stderr, "bench scale:", err)
			return 1
		}
	}
	s.check()
	writeScale(stdout, s)
	if o.jsonOut != "" {
		raw, _ := json.MarshalIndent(s, "", "  ")
		if err := os.WriteFile(o.jsonOut, append(raw, '\n'), 0o644); err != nil {
			fmt.Fprintln(stderr, "bench scale:", err)
			return 1
		}
	}
	if o.chart != "" {
		if err := os.WriteFile(o.chart, []byte(scaleSVG(s)), 0o644); err != nil {
			fmt.Fprintln(stderr, "bench scale:", err)
			return 1
		}
	}
	if o.doc != "" {
		if err := docgen.Replace(o.doc, "bench-scale", scaleMarkdown(s)); err != nil {
			fmt.Fprintln(stderr, "bench scale:", err)
			return 1
		}
	}
	for _, g := range s.Goals {
		if !g.Met {
			fmt.Fprintf(stderr, "bench scale: goal missed: %s: want %s, got %s\n", g.Name, g.Want, g.Got)
			return 1
		}
	}
	return 0
}

// measure starts the local cluster with n replicas, runs every row at every
// concurrency, and stops it, whatever happens.
func (s *Scale) measure(ctx context.Context, o scaleOptions, n int, stderr io.Writer) (err error) {
	c, err := cluster.Up(ctx, cluster.Config{Root: o.root, Dir: o.runDir, Port: o.port, Replicas: n, Work: "0",
		RedisPassword: os.Getenv("INVENTORY_REDIS_PASSWORD"), Log: stderr})
	if errors.Is(err, cluster.ErrAlreadyUp) {
		return fmt.Errorf("a cluster is already up in %s: make down first (the curve starts its own, at each number of replicas)", o.runDir)
	}
	if err != nil {
		return err
	}
	defer func() {
		if _, derr := c.Down(); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	var addrs []string
	for _, r := range c.State.Redis {
		addrs = append(addrs, r.Addr)
	}
	nodes := redisconn.NewAll(addrs, c.State.RedisPassword)
	defer redisconn.CloseAll(nodes)
	service, err := client.ForSale(c.State.URL, "")
	if err != nil {
		return err
	}
	b := &bench{nodes: nodes, reps: c.State.Replicas, service: service}
	for _, row := range scaleRows {
		for _, conc := range o.conc {
			start, err := b.counts(ctx, row)
			if err != nil {
				return err
			}
			cpu0, err := readCPU()
			if err != nil {
				return err
			}
			res, err := loadtest.Run(ctx, loadtest.Config{URL: c.State.URL, Requests: 1 << 30, Concurrency: conc, Stock: benchStock,
				Duration: o.duration, Wait: row.query(), Client: service, NoCheck: true}, row.Lock)
			if err != nil {
				return fmt.Errorf("%s at %d replicas, c=%d: %w", row.Lock, n, conc, err)
			}
			cpu1, err := readCPU()
			if err != nil {
				return err
			}
			end, err := b.counts(ctx, row)
			if err != nil {
				return err
			}
			d := end.minus(start)
			p := ScalePoint{Replicas: n, Concurrency: conc, Lock: row.Lock, Wait: row.Wait, Sales: res.SalesPerSec,
				P50: res.Latency.P50, P99: res.Latency.P99, Failed: res.NotServed(), Idle: cpu1.idleSince(cpu0)}
			if res.Sold > 0 {
				p.CommandsPerSale, p.RoundTripsPerSale = float64(d.commands)/float64(res.Sold), d.trips/float64(res.Sold)
			}
			s.Points = append(s.Points, p)
			fmt.Fprintf(stderr, "bench scale: %d replicas, c=%d, %s: %.0f sales/s, p99 %.1f ms, %.1f commands and %.1f round trips per sale, CPU idle %.0f%%\n",
				n, conc, p.Label(), p.Sales, p.P99, p.CommandsPerSale, p.RoundTripsPerSale, 100*p.Idle)
		}
	}
	return nil
}

// check holds every number of replicas' hand-off to the O(1) goal, and says
// how polling grew beside it.
func (s *Scale) check() {
	s.Goals = nil
	for _, n := range s.replicaCounts() {
		g, ok := s.growth(n, "v6", "handoff")
		if !ok {
			continue
		}
		s.Goals = append(s.Goals, Target{Name: fmt.Sprintf("v6 handoff, replicas=%d: commands per sale as waiters grow", n),
			Want: fmt.Sprintf("<= %.2f x from c=%d to c=%d", flatGrowth, g.fromC, g.toC), Got: fmt.Sprintf("%.1f -> %.1f = %.2f x", g.from, g.to, g.to/g.from),
			Met: g.to/g.from <= flatGrowth})
	}
	failed := 0
	for _, p := range s.Points {
		failed += p.Failed
	}
	s.Goals = append(s.Goals, Target{Name: "every point", Want: "every request served", Got: fmt.Sprintf("%d not served", failed), Met: failed == 0})
}

// grown is a version's commands per sale at two concurrencies.
type grown struct {
	fromC, toC int
	from, to   float64
}

// growth is lock/wait's commands per sale at flatFrom (or the lowest
// concurrency above it) and at the highest, with n replicas.
func (s *Scale) growth(n int, lock, wait string) (grown, bool) {
	var lo, hi *ScalePoint
	for i := range s.Points {
		p := &s.Points[i]
		if p.Replicas != n || p.Lock != lock || p.Wait != wait || p.CommandsPerSale == 0 {
			continue
		}
		if p.Concurrency >= flatFrom && (lo == nil || p.Concurrency < lo.Concurrency) {
			lo = p
		}
		if hi == nil || p.Concurrency > hi.Concurrency {
			hi = p
		}
	}
	if lo == nil || hi == nil || hi == lo {
		return grown{}, false
	}
	return grown{lo.Concurrency, hi.Concurrency, lo.CommandsPerSale, hi.CommandsPerSale}, true
}

func (s *Scale) replicaCounts() []int {
	var out []int
	for _, p := range s.Points {
		if !slices.Contains(out, p.Replicas) {
			out = append(out, p.Replicas)
		}
	}
	return out
}

func (s *Scale) concurrencies() []int {
	var out []int
	for _, p := range s.Points {
		if !slices.Contains(out, p.Concurrency) {
			out = append(out, p.Concurrency)
		}
	}
	slices.Sort(out)
	return out
}

// point finds one point.
func (s *Scale) point(n, conc int, row Row) (ScalePoint, bool) {
	for _, p := range s.Points {
		if p.Replicas == n && p.Concurrency == conc && p.Lock == row.Lock && p.Wait == row.Wait {
			return p, true
		}
	}
	return ScalePoint{}, false
}
