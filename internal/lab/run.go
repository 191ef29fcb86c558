package lab

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/checker"
	"github.com/locklab/locklab/internal/history"
	"github.com/locklab/locklab/internal/loadtest"
	"github.com/locklab/locklab/internal/scenario"
	"github.com/locklab/locklab/internal/versions"
)

// Hold is one sale as the timeline draws it: its lane (replica), the time
// its holder believed it held the lock (history.Sale.Held), what it read
// and wrote, and how it ended. Times are Unix microseconds.
type Hold struct {
	Lock    string `json:"lock"`
	ID      string `json:"id"`
	Replica string `json:"replica"`
	Owner   string `json:"owner,omitempty"`
	From    int64  `json:"from"`
	To      int64  `json:"to"`
	Read    *int64 `json:"read,omitempty"`
	Wrote   *int64 `json:"wrote,omitempty"`
	Token   int64  `json:"token,omitempty"`
	Status  int    `json:"status"`
	Code    string `json:"code,omitempty"`
	// Overlaps says that it overlapped another owner's hold of the same
	// version's lock (checker.Overlaps): the page draws it red.
	Overlaps bool `json:"overlaps,omitempty"`
}

// markOverlaps sets each hold's Overlaps by the checker's definition, per
// version, and returns the keys (ID + Lock) of the holds it newly marked.
func markOverlaps(hs []Hold) (newly []string) {
	byLock := map[string][]int{}
	for i, h := range hs {
		byLock[h.Lock] = append(byLock[h.Lock], i)
	}
	for _, idx := range byLock {
		ws := make([]checker.Window, len(idx))
		for k, i := range idx {
			ws[k] = checker.Window{Who: hs[i].Owner, From: time.UnixMicro(hs[i].From), To: time.UnixMicro(hs[i].To)}
		}
		for k, red := range checker.Overlapping(ws) {
			if h := &hs[idx[k]]; red && !h.Overlaps {
				h.Overlaps, newly = true, append(newly, h.ID+h.Lock)
			}
		}
	}
	return newly
}

func holdOf(lock string, s history.Sale) (Hold, bool) {
	from, to, ok := s.Held()
	if !ok {
		return Hold{}, false
	}
	h := Hold{Lock: lock, ID: s.ID, Replica: s.Replica, Owner: s.Owner, From: from.UnixMicro(), To: to.UnixMicro(),
		Token: s.Token, Status: s.Status, Code: s.Code}
	if !s.Read.At.IsZero() {
		v := s.Read.Value
		h.Read = &v
	}
	if !s.Written.At.IsZero() {
		v := s.Written.Value
		h.Wrote = &v
	}
	return h, true
}

// Counts are a version's replies so far, as the load test tallies them.
type Counts struct {
	Lock      string `json:"lock"`
	Sent      int64  `json:"sent"`
	Sold      int64  `json:"sold"`
	SoldOut   int64  `json:"sold_out"`
	Fenced    int64  `json:"fenced"`
	Failed    int64  `json:"failed"`
	Unknown   int64  `json:"unknown"`
	Remaining int64  `json:"remaining"` // the lowest stock a sold reply reported; -1: none yet
}

// run is one run of the lab: its settings, and what it found.
type run struct {
	ID       string
	settings Settings
	started  time.Time
	rev      *atomic.Int64 // the lab's: stamps each summary (summary.Rev)

	mu      sync.Mutex
	ended   time.Time
	status  string // running, done, failed, cancelled
	err     string
	fixes   []Fix  // faults the nemesis could not undo
	current string // the version running now
	results []loadtest.Result
	counts  []Counts
	holds   []Hold
	cfg     loadtest.Config
	faults  []scenario.Fault // the nemesis's schedule, when it runs
	report  []byte           // the ended run's HTML report, written once
}

// summary is a run's line in the table of runs.
type summary struct {
	ID       string            `json:"id"`
	Settings Settings          `json:"settings"`
	Started  time.Time         `json:"started"`
	Ended    time.Time         `json:"ended,omitzero"`
	Status   string            `json:"status"`
	Faults   []scenario.Fault  `json:"faults,omitempty"`
	Error    string            `json:"error,omitempty"`
	Fixes    []Fix             `json:"fixes,omitempty"`
	Current  string            `json:"current,omitempty"`
	Counts   []Counts          `json:"counts"`
	Results  []loadtest.Result `json:"results"`
	// Rev orders what the lab says of its runs and cells (CellResult.Rev):
	// a summary taken later has a higher one, so the page keeps the
	// highest, whatever order a reply and the events reach it in.
	Rev int64 `json:"rev"`
}

// evidence is a whole run: its summary and every hold.
type evidence struct {
	summary
	Holds []Hold `json:"holds"`
}

func (r *run) summary() summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	return summary{ID: r.ID, Settings: r.settings, Started: r.started, Ended: r.ended, Status: r.status, Error: r.err, Fixes: r.fixes, Faults: r.faults,
		Current: r.current, Counts: slices.Clone(r.counts), Results: slices.Clone(r.results), Rev: r.rev.Add(1)}
}

func (r *run) snapshot() evidence {
	s := r.summary()
	r.mu.Lock()
	defer r.mu.Unlock()
	return evidence{summary: s, Holds: slices.Clone(r.holds)}
}

// reportHTML is the run's HTML report, written at its first request once
// the run has ended and kept: the report's overlap pass is quadratic in the
// holds, too much to do again at every GET. Nil while the run goes.
func (r *run) reportHTML() ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.status == "running" || r.report != nil {
		return r.report, nil
	}
	var b bytes.Buffer
	if err := loadtest.WriteHTML(&b, loadtest.NewReport(r.cfg, r.results, []string{"A run of the lab (" + r.ID + ")."})); err != nil {
		return nil, err
	}
	r.report = b.Bytes()
	return r.report, nil
}

// start begins a run (202 with its summary), or says why not: 409 while
// another runs, 400 with what is wrong in the settings.
func (l *Lab) start(w http.ResponseWriter, req *http.Request) {
	var s Settings
	if err := decode(req, &s); err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	if err := s.validate(); err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	if why := l.faultless().Text; s.Nemesis && why != "" {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "the nemesis needs a cluster to fault, and "+why+": start it with make lab")
		return
	}
	if slices.ContainsFunc(s.Locks, func(l string) bool { return versions.Needs(l) != "" }) {
		h, err := l.health(req.Context())
		if why, _ := versions.Missing(s.Locks, h.Settings); err == nil && why != "" {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, why)
			return
		}
	}
	r := &run{ID: history.RunID(), settings: s, started: time.Now(), status: "running", rev: &l.rev}
	ctx, done, ok := l.claim(w, "run", r.ID)
	if !ok {
		return
	}
	l.mu.Lock()
	l.running = r
	l.runs = append(l.runs, r)
	if len(l.runs) > keptRuns {
		l.runs = l.runs[len(l.runs)-keptRuns:]
	}
	l.mu.Unlock()
	// The reply is the run as accepted, taken before it starts: a run that
	// fails at once has its end event out before this reply is written, and
	// the page keeps what has the higher Rev (a summary taken after the
	// start could already be the failure, as new as the event, or newer).
	accepted := r.summary()
	go func() {
		l.execute(ctx, r)
		done()
		l.publish("end", r.summary())
	}()
	writeJSON(w, http.StatusAccepted, accepted)
}

// stop cancels what runs: a run's load test stops sending, the sales in
// flight end (each releases its lock), and what was done is kept; a cell
// heals its fault on its way out.
func (l *Lab) stop(w http.ResponseWriter, _ *http.Request) {
	l.mu.Lock()
	busy, cancel := l.busy, l.cancel
	l.mu.Unlock()
	if cancel == nil {
		writeError(w, http.StatusConflict, "not_running", "nothing is running")
		return
	}
	cancel()
	writeJSON(w, http.StatusAccepted, map[string]string{"stopping": busy})
}

// execute runs each version in turn with the load test, following the
// replicas' history meanwhile, and publishes what it finds every tick.
func (l *Lab) execute(ctx context.Context, r *run) {
	cfg := loadtest.Config{URL: l.cfg.SaleURL, Requests: r.settings.Requests, Concurrency: r.settings.Concurrency,
		Stock: r.settings.Stock, AdminToken: l.cfg.AdminToken, Wait: r.settings.Wait, Fence: r.settings.Fence,
		Client: l.svc} // nil: Run says what is wrong with the URL
	var env scenario.Env
	var faults []scenario.Fault
	if r.settings.Nemesis { // a steady load for the duration, never sold out: every sale tests the lock
		var err error
		if env, err = l.env(ctx); err != nil {
			r.mu.Lock()
			r.status, r.err, r.ended = "failed", err.Error(), time.Now()
			r.mu.Unlock()
			return
		}
		cfg.Rate, cfg.Duration = scenario.NemesisRate, time.Duration(r.settings.Seconds)*time.Second
		cfg.Requests = int(cfg.Rate*cfg.Duration.Seconds()) + 1
		cfg.Stock = int64(cfg.Requests)
		faults = env.Schedule(r.settings.Seed, cfg.Duration, r.settings.Locks...)
	}
	r.mu.Lock()
	r.cfg, r.faults = cfg, faults
	r.mu.Unlock()
	status := "done"
	for _, lock := range r.settings.Locks {
		if ctx.Err() != nil {
			status = "cancelled"
			break
		}
		var res loadtest.Result
		var err error
		if r.settings.Nemesis {
			var marks []history.Mark
			start := time.Now()
			marks, err = env.UnderNemesis(ctx, lock, faults, cfg.Rate, func(s string) { l.cfg.Log.Warn(s) },
				func(ctx context.Context, hooks func(int64) string) (err error) {
					c := cfg
					c.Hooks = hooks
					res, err = l.version(ctx, r, c, lock)
					return err
				})
			res.Marks = marks
			if err == nil { // judged as the load test's -nemesis judges: per lock, and "not tested" where it could not say
				row := scenario.JudgeNemesis(res, cfg.Fence, r.settings.Seed, faults, env.Used(res), start)
				res.Faults, res.HistoryChecked, res.HistoryNote, res.Reasons = row.Faults, row.HistoryChecked, row.HistoryNote, row.Reasons
				if len(row.NotTested) > 0 {
					res.TooLittle = strings.Join(row.NotTested, "; ")
				}
			}
		} else {
			res, err = l.version(ctx, r, cfg, lock)
		}
		r.mu.Lock()
		if res.Lock != "" {
			r.results = append(r.results, res)
		}
		r.fixes = append(r.fixes, l.fixes(err)...) // also when cancelled: a heal may fail on the way out
		r.mu.Unlock()
		l.publish("result", map[string]any{"run": r.ID, "result": res})
		switch {
		case errors.Is(err, context.Canceled):
			status = "cancelled"
		case err != nil:
			status = "failed"
			r.mu.Lock()
			r.err = err.Error()
			r.mu.Unlock()
		}
		if err != nil {
			break
		}
	}
	r.mu.Lock()
	r.status, r.ended, r.current = status, time.Now(), ""
	r.mu.Unlock()
}

// version runs one version of r: the load test, with its replies counted as
// they come and its holds followed in the replicas' history, both published
// every tick; at the end the holds are the load test's own evidence.
func (l *Lab) version(ctx context.Context, r *run, cfg loadtest.Config, lock string) (loadtest.Result, error) {
	cfg.RunID = history.RunID()
	var c struct{ sent, sold, soldOut, fenced, failed, unknown, remaining atomic.Int64 }
	c.remaining.Store(-1)
	cfg.Progress = func(op checker.Op) {
		c.sent.Add(1)
		switch op.Outcome {
		case api.Sold:
			c.sold.Add(1)
			for rem := c.remaining.Load(); rem < 0 || op.Remaining < rem; rem = c.remaining.Load() {
				if c.remaining.CompareAndSwap(rem, op.Remaining) {
					break
				}
			}
		case api.SoldOut:
			c.soldOut.Add(1)
		case api.Fenced:
			c.fenced.Add(1)
		case api.Unknown:
			c.unknown.Add(1)
		default:
			c.failed.Add(1)
		}
	}
	counts := func() Counts {
		return Counts{Lock: lock, Sent: c.sent.Load(), Sold: c.sold.Load(), SoldOut: c.soldOut.Load(), Fenced: c.fenced.Load(),
			Failed: c.failed.Load(), Unknown: c.unknown.Load(), Remaining: c.remaining.Load()}
	}
	r.mu.Lock()
	r.current = lock
	idx := len(r.counts)
	r.counts = append(r.counts, counts())
	r.mu.Unlock()

	f := newFollower(l, cfg.RunID, lock)
	f.start(ctx)
	tick := time.NewTicker(l.cfg.Tick)
	defer tick.Stop()
	type outcome struct {
		res loadtest.Result
		err error
	}
	ended := make(chan outcome, 1)
	go func() {
		res, err := loadtest.Run(ctx, cfg, lock)
		ended <- outcome{res, err}
	}()
	publish := func() {
		now := counts()
		holds := f.take()
		r.mu.Lock()
		r.counts[idx] = now
		before := len(r.holds)
		r.holds = append(r.holds, holds...)
		newly := markOverlaps(r.holds) // the new holds' marks, and the earlier ones' a new hold overlaps
		holds = slices.Clone(r.holds[before:])
		r.mu.Unlock()
		l.publish("progress", map[string]any{"run": r.ID, "counts": now, "holds": holds, "overlaps": newly})
	}
	for {
		select {
		case <-tick.C:
			publish()
		case o := <-ended:
			f.stop()
			publish()
			// The load test read every replica's history for its verdict:
			// that is the version's whole timeline, replacing what was
			// followed live (which may have missed the last tick's).
			if len(o.res.Sales) > 0 {
				all := []Hold{} // a version with no lock holds nothing: [], never null
				for _, s := range o.res.Sales {
					if h, ok := holdOf(lock, s); ok {
						all = append(all, h)
					}
				}
				markOverlaps(all)
				r.mu.Lock()
				r.holds = append(slices.DeleteFunc(r.holds, func(h Hold) bool { return h.Lock == lock }), all...)
				r.mu.Unlock()
				l.publish("holds", map[string]any{"run": r.ID, "lock": lock, "holds": all})
			}
			return o.res, o.err
		}
	}
}
