// Package loadtest fires concurrent sales at the service and measures what
// each lock version did to the stock: how many replies said "sold", how much
// the stock actually went down, and the difference, the oversell.
package loadtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/locklab/locklab/internal/checker"
	"github.com/locklab/locklab/internal/client"
	"github.com/locklab/locklab/internal/history"
	"github.com/locklab/locklab/internal/reason"
	"github.com/locklab/locklab/internal/versions"
)

// Config is one load test.
type Config struct {
	URL         string // the sale endpoint, http://localhost/sale
	Requests    int    // per version
	Concurrency int
	Stock       int64  // set before each version's run
	AdminToken  string // for PUT /stock, GET /history, ?lock= beyond loopback and the fault hooks
	// Wait, when set, chooses how the service's lock waits (?wait=poll,
	// notify or handoff); empty: the replicas' -wait.
	Wait string
	// Duration, when set, stops sending new requests after it: Requests is
	// then an upper bound (the bench runs every version for the same time).
	Duration time.Duration
	// Rate, when set, makes it an open model: request i is due at start +
	// i/Rate, whatever the replies do, with at most Concurrency in flight
	// (a due request waits for a free one, and that wait counts). Each
	// latency runs from the request's due time, so a stall shows in every
	// request it delayed, not only in the one it held (coordinated
	// omission). 0: a closed loop, each worker sending as soon as its last
	// reply came.
	Rate float64
	// Fence turns fencing on for every sale (the fence=1 hook: the replicas
	// need -chaos, and AdminToken goes with each sale).
	Fence bool
	// Hooks, when set, gives request n (numbered from the start, as Rate
	// schedules them) extra fault hooks ("hold=1.5s"; "": none), with
	// AdminToken: how -nemesis makes a slow holder part of the load, so its
	// sale is in the evidence like any other.
	Hooks func(n int64) string
	// Plain fires the requests at URL as it is, with no stock handling and no
	// ?lock=: for measuring the load test itself against wrk.
	Plain bool
	// NoCheck skips recording the evidence and checking it: for runs that
	// measure speed only (the bench).
	NoCheck bool
	// Client, when set, is the service's client, carrying AdminToken (one
	// shared by many runs keeps its connections); nil: Run makes one.
	Client *client.Client
	// Progress, when set, is told of every finished request, as the
	// checker will see it (its outcome, the stock it reported, its replica).
	// It is called from the workers at once: it must be safe for that.
	Progress func(checker.Op)
	// RunID, when set, names the run (its requests' ids are RunID-N);
	// empty: a new one. Whoever follows the replicas' history live (the
	// lab) sets it, to know the run's sales when they come.
	RunID string
}

// Result is what one version did.
type Result struct {
	Lock        string  `json:"lock"`
	Wait        string  `json:"wait,omitempty"`
	Requests    int     `json:"requests"`
	Concurrency int     `json:"concurrency"`
	Rate        float64 `json:"rate,omitempty"` // offered requests/s (Config.Rate); 0: closed loop
	Sold        int     `json:"sold"`           // 200 replies
	SoldOut     int     `json:"sold_out"`       // 409 replies
	// Fenced counts 412 replies: stale writes the stock refused because a
	// newer lock holder had written (the service's -fence).
	Fenced int `json:"fenced"`
	// Failed counts requests known to have sold nothing; the checker's
	// Unknown, those that may have sold (see api.Unknown).
	Failed int `json:"failed"`
	// FailedBy counts failed and unknown requests by HTTP status and the
	// reply's code ("503 lock_timeout"; the status alone when it named
	// none) or "transport".
	FailedBy    map[string]int `json:"failed_by,omitempty"`
	StockBefore int64          `json:"stock_before"`
	StockAfter  int64          `json:"stock_after"`
	// Oversold is sold - (before - after): "sold" replies the stock never paid for.
	Oversold int64 `json:"oversold"`
	// BeyondStock is how many more units were sold than there were.
	BeyondStock    int64          `json:"sold_beyond_stock"`
	Seconds        float64        `json:"seconds"`
	SalesPerSec    float64        `json:"sales_per_sec"`
	RequestsPerSec float64        `json:"requests_per_sec"`
	Latency        Latency        `json:"latency_ms"`
	Replicas       map[string]int `json:"replicas"` // replies per replica
	// LeaseWarnings counts sales the service reported as sold after its lock
	// had expired (the reply's warning field).
	LeaseWarnings int `json:"lease_warnings,omitempty"`
	// The checker's verdict on the run's evidence (two holders, lost
	// updates, linearizability, the oversell's range).
	checker.Verdict
	// HistoryNote says why the replicas' history was not checked, if not.
	HistoryNote string `json:"history_note,omitempty"`
	// TooLittle says why the run tested too little for its verdict to mean
	// anything (it sold nothing, or served under half its requests); "" if
	// it did not. Such a row is marked in every table, and fails
	// -expect-safe: a lock whose every sale was refused oversold nothing,
	// but showed nothing either.
	TooLittle string `json:"too_little,omitempty"`
	// Faults counts, under a nemesis, the faults of its schedule that hit
	// a process this run used (its lock's servers, the stock's node, the
	// replicas that served it): what the run was tested against.
	Faults int `json:"faults,omitempty"`
	// Ops and Sales are the evidence: every request as the client saw it,
	// every sale as its replica recorded it (for the report's timeline).
	Ops   []checker.Op   `json:"-"`
	Sales []history.Sale `json:"-"`
	// Marks are the faults injected during the run (-nemesis), drawn on the
	// timeline.
	Marks []history.Mark `json:"marks,omitempty"`

	unknown int // requests with an unknown outcome, as tallied (plain runs too)
}

// Label names the run: the version, and how it waited when the load test
// chose it ("v6 handoff").
func (r Result) Label() string { return strings.TrimSpace(r.Lock + " " + r.Wait) }

// Anchor is Label as an HTML id.
func (r Result) Anchor() string { return strings.ReplaceAll(r.Label(), " ", "-") }

// Latency percentiles in milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Run runs the load test for one version (lock; empty in plain mode): set
// the stock, fire the requests, read the stock back, and (unless NoCheck)
// read the replicas' history of the run and check the evidence.
func Run(ctx context.Context, cfg Config, lock string) (Result, error) {
	if cfg.Requests < 1 || cfg.Concurrency < 1 || cfg.Rate < 0 {
		return Result{}, errors.New("loadtest: requests and concurrency must be >= 1, the rate >= 0")
	}
	if v, ok := versions.Lookup(lock); ok && !v.Wait {
		cfg.Wait = "" // it waits its own way: -wait does not reach it, and its result must not say it did
	}
	res := Result{Lock: lock, Wait: cfg.Wait, Concurrency: cfg.Concurrency, Rate: cfg.Rate, FailedBy: map[string]int{}, Replicas: map[string]int{}}
	svc, err := cfg.Service()
	if err != nil {
		return res, err
	}
	target := cfg.URL
	if !cfg.Plain {
		if target, res.StockBefore, err = cfg.prepare(ctx, svc, lock); err != nil {
			return res, err
		}
	}
	run := cfg.RunID
	if run == "" {
		run = history.RunID()
	}
	started := time.Now()
	hist, elapsed := cfg.fireAll(ctx, svc, target, run, &res)
	res.summarise(hist, elapsed)
	if !cfg.Plain {
		// Read even after an interrupted run: what it did to the stock counts.
		after, err := svc.Stock(context.WithoutCancel(ctx))
		if err != nil {
			return res, err
		}
		res.StockAfter = after
		res.Oversold = int64(res.Sold) - (res.StockBefore - after)
		res.BeyondStock = max(0, int64(res.Sold)-res.StockBefore)
		little := res.tooLittle()
		var note reason.Reason
		if !cfg.NoCheck {
			res.Sales, note = histories(ctx, svc, res.Replicas, started, run)
			res.Verdict = checker.Check(checker.Run{StockBefore: res.StockBefore, StockAfter: after, Ops: res.Ops, Sales: res.Sales})
		}
		// After the verdict: its reasons and the run's own in one list.
		res.Because(&res.TooLittle, little)
		res.Because(&res.HistoryNote, note)
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("loadtest: stopped: %w", err)
	}
	return res, nil
}

// prepare sets the stock and returns the sale URL for lock and the stock
// as read back. A version the tutorial runs on one process (v1) gets one
// replica's URL, the replica that answers /healthz.
func (cfg Config) prepare(ctx context.Context, svc *client.Client, lock string) (target string, before int64, err error) {
	sales := svc
	if v, _ := versions.Lookup(lock); v.OneReplica {
		h, err := svc.Health(ctx)
		if err != nil {
			return "", 0, err
		}
		sales = svc.Replica(h.Replica)
	}
	if err := svc.SetStock(ctx, cfg.Stock); err != nil {
		return "", 0, err
	}
	if before, err = svc.Stock(ctx); err != nil {
		return "", 0, err
	}
	return sales.SaleURL(client.Query{Lock: lock, Wait: cfg.Wait, Fence: cfg.Fence}), before, nil
}

// histories reads every replica's record of the run's sales (through nginx's
// /replica/NAME/ route), or says why it could not.
func histories(ctx context.Context, svc *client.Client, replicas map[string]int, since time.Time, run string) ([]history.Sale, reason.Reason) {
	sales := []history.Sale{}
	for _, name := range slices.Sorted(maps.Keys(replicas)) {
		got, err := svc.Replica(name).History(ctx, since, run)
		if err != nil {
			return nil, reason.New("historyNotRead", "the replicas' history was not read: {err}", "err", err)
		}
		sales = append(sales, got...)
	}
	return sales, reason.Reason{}
}

// fireAll sends up to cfg.Requests requests to target over cfg.Concurrency
// workers (for at most cfg.Duration when set; on cfg.Rate's schedule when
// set), each with its own request id (run-N), tallies the replies into res,
// records each request in res.Ops, and returns the latencies and the time
// it took.
func (cfg Config) fireAll(ctx context.Context, svc *client.Client, target, run string, res *Result) (*hdrhistogram.Histogram, time.Duration) {
	var (
		stopped atomic.Bool
		mu      sync.Mutex
		wg      sync.WaitGroup
		hist    = newHistogram()
		started = time.Now()
	)
	if cfg.Duration > 0 {
		t := time.AfterFunc(cfg.Duration, func() { stopped.Store(true) })
		defer t.Stop()
	}
	next := cfg.closedLoop(ctx, &stopped)
	if cfg.Rate > 0 {
		sctx, cancel := context.WithCancel(ctx)
		defer cancel() // the schedule stops with the run
		next = cfg.schedule(sctx, started, &stopped)
	}
	for range cfg.Concurrency {
		wg.Go(func() {
			local := newHistogram()
			tally := Result{FailedBy: map[string]int{}, Replicas: map[string]int{}}
			for n, due, ok := next(); ok; n, due, ok = next() {
				t := target
				if cfg.Hooks != nil {
					if h := cfg.Hooks(n); h != "" {
						t += "&" + h
					}
				}
				op := cfg.fire(ctx, svc, t, run+"-"+strconv.FormatInt(n, 10), &tally)
				_ = local.RecordValue(max(1, op.Return.Sub(due).Microseconds()))
				if !cfg.Plain && !cfg.NoCheck {
					tally.Ops = append(tally.Ops, op)
				}
				if cfg.Progress != nil {
					cfg.Progress(op)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			hist.Merge(local)
			res.add(tally)
		})
	}
	wg.Wait()
	return hist, time.Since(started)
}

// closedLoop hands out request numbers 1..Requests, each due when taken.
func (cfg Config) closedLoop(ctx context.Context, stopped *atomic.Bool) func() (int64, time.Time, bool) {
	var counter atomic.Int64
	return func() (int64, time.Time, bool) {
		n := counter.Add(1)
		return n, time.Now(), n <= int64(cfg.Requests) && !stopped.Load() && ctx.Err() == nil
	}
}

// schedule hands out request numbers with their due times, start + (n-1) /
// Rate, each once it is due: a worker that takes one late (all were busy)
// still measures from its due time.
func (cfg Config) schedule(ctx context.Context, start time.Time, stopped *atomic.Bool) func() (int64, time.Time, bool) {
	type slot struct {
		n   int64
		due time.Time
	}
	slots := make(chan slot)
	go func() {
		defer close(slots)
		timer := time.NewTimer(0)
		defer timer.Stop()
		for n := int64(1); n <= int64(cfg.Requests) && !stopped.Load(); n++ {
			due := start.Add(time.Duration(float64(n-1) / cfg.Rate * float64(time.Second)))
			timer.Reset(time.Until(due))
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			select {
			case <-ctx.Done():
				return
			case slots <- slot{n, due}:
			}
		}
	}()
	return func() (int64, time.Time, bool) {
		s, ok := <-slots
		return s.n, s.due, ok
	}
}

func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(5*time.Minute/time.Microsecond), 3)
}

// summarise fills in the totals, rates and latency percentiles.
func (r *Result) summarise(hist *hdrhistogram.Histogram, elapsed time.Duration) {
	r.Requests = r.Sold + r.SoldOut + r.Fenced + r.Failed + r.unknown
	r.Seconds = elapsed.Seconds()
	r.SalesPerSec = float64(r.Sold) / r.Seconds
	r.RequestsPerSec = float64(r.Requests) / r.Seconds
	ms := func(us int64) float64 { return float64(us) / 1000 }
	r.Latency = Latency{P50: ms(hist.ValueAtQuantile(50)), P90: ms(hist.ValueAtQuantile(90)),
		P99: ms(hist.ValueAtQuantile(99)), Max: ms(hist.Max())}
}

// NotServed counts the requests that failed or whose outcome is unknown.
func (r Result) NotServed() int { return r.Failed + r.unknown }

// tooLittle is TooLittle for r.
func (r Result) tooLittle() reason.Reason {
	switch served := r.Requests - r.NotServed(); {
	case r.Sold == 0:
		return reason.New("soldNothing", "sold nothing")
	case 2*served < r.Requests:
		return reason.New("served", "served {n} of {of}", "n", served, "of", r.Requests)
	}
	return reason.Reason{}
}

func (r *Result) add(o Result) {
	r.Sold += o.Sold
	r.SoldOut += o.SoldOut
	r.Fenced += o.Fenced
	r.Failed += o.Failed
	r.LeaseWarnings += o.LeaseWarnings
	r.unknown += o.unknown
	for k, v := range o.FailedBy {
		r.FailedBy[k] += v
	}
	for k, v := range o.Replicas {
		r.Replicas[k] += v
	}
	r.Ops = append(r.Ops, o.Ops...)
}
