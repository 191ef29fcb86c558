// Package scenario makes each version's flaw happen on demand against a
// running cluster, and measures what happened: it does not assume it. Each
// scenario drives sales through the service's fault hooks (-chaos) and watches
// the lock key in Redis to know when to act: it waits on observable state (the
// lock appearing, the lease expiring), never on a guessed sleep. Every
// ordering it relies on has half a lease of margin on each side.
package scenario

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locklab/locklab/internal/checker"
	"github.com/locklab/locklab/internal/history"
	"github.com/locklab/locklab/internal/reason"
)

// Outcomes, as the tables print them.
const (
	Oversell         = "oversell"
	NoOversell       = "no oversell"
	ForeignDelete    = "oversell, deletes successor's lock"
	NoForeignDelete  = "oversell, keeps successor's lock"
	DeletesSuccessor = "deletes successor's lock"
	KeepsSuccessor   = "keeps successor's lock"
	WaitsOnItself    = "waits on itself"
	Passes           = "passes"
	StaleRefused     = "no oversell, stale write refused"
	Deadlock         = "waits until its deadline (deadlock)"
	Clean503         = "clean 503s, stock unchanged"
	KeepsSelling     = "keeps selling, no oversell"
	StopsBeforeWrite = "stops before its write, no oversell"
	Resumes          = "resumes after the lease, no oversell"
	WaitsForHolder   = "every sale waits until the holder resumes, no oversell"
	ResumesAtOnce    = "resumes at once, no oversell"
	ConfirmedLost    = "a confirmed sale lost"
	NoConfirmedLost  = "no confirmed sale lost"
)

// NotTested begins the observation of a cell whose precondition did not
// happen (the holder was never paused while holding, the successor gave up
// before the lease ran out, the acknowledgement was not what stopped the
// sale): the cell tested nothing, and says why after it. It is never a
// pass, whatever was expected: Cell.OK is false for it.
const NotTested = "not tested: "

// notTested is the observation of a cell whose precondition did not happen,
// why as a reason: Run lists it in the cell's Reasons (the lab's page says
// it in its reader's language), found again by its text among the last
// few made (whys, bounded: a cell's run reads its own at once).
func notTested(why reason.Reason) string {
	whys.Lock()
	defer whys.Unlock()
	if whys.by == nil || len(whys.by) >= 64 {
		whys.by = map[string]reason.Reason{}
	}
	whys.by[why.Text] = why
	return NotTested + why.Text
}

var whys struct {
	sync.Mutex
	by map[string]reason.Reason // by text
}

// whyNotTested is the reason notTested put in observed ("" code: none).
func whyNotTested(observed string) reason.Reason {
	text, ok := strings.CutPrefix(observed, NotTested)
	if !ok {
		return reason.Reason{}
	}
	whys.Lock()
	defer whys.Unlock()
	return whys.by[text]
}

// Scenario is one fault and what each version is expected to do under it.
type Scenario struct {
	Name     string `json:"name"`
	Injected string `json:"injected"`
	// Requirement names the tutorial's requirement of a lock this scenario
	// tests, as the lab's "what to use" table titles its column (empty: not
	// a column there).
	Requirement string            `json:"requirement,omitempty"`
	Expect      map[string]string `json:"expect"` // version -> expected outcome; the versions it applies to
	// NeedsProcs says that it freezes or kills processes: it needs Env.Procs.
	NeedsProcs bool `json:"needs_procs"`
	// NeedsFaults says that it cuts or delays the network: it needs
	// Env.Faults.
	NeedsFaults bool `json:"needs_faults,omitempty"`
	// NeedsSentinel says that it runs on a cluster whose stock node Redis
	// Sentinel watches (SENTINEL=1), and only there: every other scenario
	// runs where no Sentinel would fail the node over under it.
	NeedsSentinel bool `json:"needs_sentinel,omitempty"`
	// OutwaitsLease says that its second sale must be able to wait past
	// the first one's lease: the replicas' -acquire-timeout must be longer
	// than their -ttl, or the cell could only see the successor give up.
	OutwaitsLease bool `json:"outwaits_lease,omitempty"`
	// LocalOnly says why it runs on the local cluster only ("": it runs
	// on Compose too, unless it needs the fault proxies).
	LocalOnly string `json:"local_only,omitempty"`
	run       runFunc
}

// Unfit says why s cannot run against e ("": it can): the fault proxies it
// needs, the Sentinel topology it needs or must not have, or an acquire
// deadline too short for its successor to outwait the lease (it could not
// mean anything: refused before any fault). make scenarios runs its matrix
// in two passes, without Sentinel and with it.
func (s Scenario) Unfit(e Env) string {
	switch {
	case s.NeedsFaults && e.Faults == nil:
		return "needs the fault proxies: a local cluster started with FAULTS=1 (make scenarios starts one)"
	case s.NeedsSentinel && len(e.Sentinels) == 0:
		return "needs Redis Sentinel watching the stock's node: a local cluster started with SENTINEL=1 FAULTS=1 (make scenarios' second pass)"
	case !s.NeedsSentinel && len(e.Sentinels) > 0:
		return "runs on a cluster without Sentinel (make scenarios' first pass): here Sentinel would fail the stock's node over under it"
	}
	return s.Refuses(e)
}

// Refuses says why s, run against e, could mean nothing ("": it could):
// its successor must outwait the first sale's lease, and the replicas'
// acquire deadline is not longer than it. Unfit includes it; unlike the
// other reasons, which only say the cell belongs to another pass, it is
// an error even where a whole matrix runs.
func (s Scenario) Refuses(e Env) string {
	if s.OutwaitsLease && e.AcquireTimeout <= e.TTL {
		return fmt.Sprintf("needs its second sale to wait past the first one's lease, but the replicas' -acquire-timeout (%s) is not longer than their -ttl (%s): raise INVENTORY_ACQUIRE_TIMEOUT above INVENTORY_TTL", e.AcquireTimeout, e.TTL)
	}
	return ""
}

// OnCompose reports whether s runs against the Compose stack, and if not,
// why.
func (s Scenario) OnCompose() (bool, string) {
	switch {
	case s.NeedsFaults:
		return false, "needs the fault proxies and the clock shim (FAULTS=1), which only the local cluster has"
	case s.LocalOnly != "":
		return false, s.LocalOnly
	}
	return true, ""
}

// runFunc makes a scenario happen to lock, with the lock key gone and the
// stock set to before, and says what it observed.
type runFunc func(ctx context.Context, e Env, lock string, before int64) (observed, detail string, err error)

// Cell is one scenario run against one version.
type Cell struct {
	Scenario string `json:"scenario"`
	Lock     string `json:"lock"`
	Expected string `json:"expected"`
	Observed string `json:"observed"`
	Detail   string `json:"detail"`
	// TwoHolders and LostUpdates are the checker's counts over the cell's
	// sales, from the replicas' history; Evidence says how they contradict
	// the observed outcome ("" when they agree).
	TwoHolders  int    `json:"two_holders"`
	LostUpdates int    `json:"lost_updates"`
	Evidence    string `json:"evidence,omitempty"`
	// Sales and Marks are the cell's evidence for its timeline: its sales
	// as the replicas recorded them, and the faults it injected.
	Sales   []history.Sale  `json:"-"`
	Marks   []history.Mark  `json:"marks,omitempty"`
	Verdict checker.Verdict `json:"-"`
	// Reasons are the why of a "not tested" observation as a reason
	// (code and params), for the lab's page.
	Reasons []reason.Reason `json:"reasons,omitempty"`
}

// OK reports whether the observation matched the expectation, and the
// history agrees with it. A cell that tested nothing is never OK.
func (c Cell) OK() bool { return c.Expected == c.Observed && c.Evidence == "" && !c.NotTested() }

// NotTested reports whether the cell's precondition did not happen: its
// observation says "not tested" and why.
func (c Cell) NotTested() bool { return strings.HasPrefix(c.Observed, NotTested) }

// All lists the scenarios: what each injects and what each version is
// expected to do, read from scenarios.json (prose, kept as data), each bound
// to the code that makes it happen.
var All = bind(catalogue, map[string]runFunc{
	"slow-holder":            slowHolder(false),
	"slow-holder+fence":      slowHolder(true),
	"lost-lease":             lostLease,
	"release-race":           releaseRace,
	"crash-holder":           crashHolder,
	"dead-waiter-handoff":    deadWaiter("handoff"),
	"dead-waiter-notify":     deadWaiter("notify"),
	"node-down":              nodeDown,
	"majority-down":          majorityDown,
	"partition-holder":       partitionHolder(false),
	"partition-holder+fence": partitionHolder(true),
	"delayed-write":          delayedWrite(false),
	"delayed-write+fence":    delayedWrite(true),
	"clock-jump":             clockJump(false),
	"clock-jump+fence":       clockJump(true),
	"failover":               failover(false),
	"failover+ack":           failover(true),
	"failover-write":         failoverWrite(false),
	"failover-write+ack":     failoverWrite(true),
	"failover-sentinel":      failoverSentinel(false),
	"failover-sentinel+ack":  failoverSentinel(true),
	"redlock-restart":        redlockRestart(noFix),
	"redlock-restart+delay":  redlockRestart(delayRestart),
	"redlock-restart+fsync":  redlockRestart(fsyncAlways),
	"pause-holder":           pauseHolder(false),
	"pause-holder+fence":     pauseHolder(true),
	"reentry":                reentry,
	"lost-wakeup":            lostWakeup,
})

//go:embed scenarios.json
var catalogue []byte

// bind parses the catalogue and gives each scenario its run.
func bind(raw []byte, runs map[string]runFunc) []Scenario {
	var all []Scenario
	if err := json.Unmarshal(raw, &all); err != nil {
		panic("scenario: scenarios.json: " + err.Error())
	}
	for i, s := range all {
		if all[i].run = runs[s.Name]; all[i].run == nil {
			panic("scenario: no code for " + s.Name)
		}
	}
	if len(all) != len(runs) {
		panic("scenario: scenarios.json and the code disagree on the scenarios")
	}
	return all
}

// Names lists the scenarios' names, in order.
func Names() []string {
	var names []string
	for _, s := range All {
		names = append(names, s.Name)
	}
	return names
}

// Run runs s against lock and compares.
func (s Scenario) Run(ctx context.Context, e Env, lock string) (Cell, error) {
	c := Cell{Scenario: s.Name, Lock: lock, Expected: s.Expect[lock]}
	e.lock = lock
	if s.NeedsProcs && e.Procs == nil {
		return c, fmt.Errorf("%s needs control of the cluster's processes (the local cluster's run directory)", s.Name)
	}
	if why := s.Unfit(e); why != "" {
		return c, fmt.Errorf("%s %s", s.Name, why)
	}
	var start time.Time
	again := ""
	for {
		before, err := e.reset(ctx)
		if err != nil {
			return c, err
		}
		start = time.Now()
		e.cell, e.seq, e.marks = "cell-"+history.RunID(), new(atomic.Int64), &marks{}
		c.Observed, c.Detail, err = s.run(ctx, e, lock, before)
		if errors.Is(err, errStranded) && again == "" { // once: a second stranding is the cell's error
			again = fmt.Sprintf("; ran again: in its first run (%s), %v", e.cell, err)
			continue
		}
		if err != nil {
			return c, err
		}
		break
	}
	c.Detail += again
	c.Marks = e.marks.list
	v, sales, err := e.evidence(ctx, start)
	if err != nil {
		return c, err
	}
	c.Sales, c.Verdict, c.TwoHolders, c.LostUpdates = sales, v, v.TwoHolders, v.LostUpdates
	if c.Observed == byHistory {
		c.Observed = historyOutcome(v.TwoHolders)
	}
	c.Detail += fmt.Sprintf("; history: %d two holders, %d lost updates", c.TwoHolders, c.LostUpdates)
	for _, s := range sales {
		if s.ReleaseError != "" { // its key stays where the release did not reach, until its lease ends
			c.Detail += fmt.Sprintf(", %s's release failed (%s)", s.Replica, s.ReleaseError)
		}
	}
	c.Evidence = agrees(c.Observed, v)
	if why := whyNotTested(c.Observed); why.Code != "" {
		c.Reasons = append(c.Reasons, why)
	}
	return c, nil
}

// agrees says how the checker's verdict on a cell's sales contradicts its
// observed outcome, or "" when it does not. Who overlapped whom is the lesson
// itself: an oversell shows two holders at once and a lost update; a version
// that kept its sales apart shows neither; fencing shows the two holders and
// no lost update.
func agrees(observed string, v checker.Verdict) string {
	switch {
	case observed == Oversell || observed == ForeignDelete || observed == NoForeignDelete:
		if v.TwoHolders == 0 || v.LostUpdates == 0 {
			return "an oversell, but the history shows no two holders or no lost update"
		}
	case observed == NoOversell && (v.TwoHolders != 0 || v.LostUpdates != 0):
		return "no oversell, but the history shows two holders or a lost update"
	case observed == NoTwoHolders && v.LostUpdates != 0:
		return "no two holders, but the history shows a lost update"
	case observed == StaleRefused && (v.TwoHolders == 0 || v.LostUpdates != 0):
		return "a refused stale write, but the history does not show two holders without a lost update"
	case (observed == AllWoken || observed == Stranded || observed == StrandsCleanly) && (v.TwoHolders != 0 || v.LostUpdates != 0):
		return "nothing oversold, but the history shows two holders or a lost update"
	case observed == StopsBeforeWrite && v.LostUpdates != 0:
		return "stopped before its write, but the history shows a lost update"
	}
	return ""
}

// evidence reads both replicas' record of the cell's sales and checks it.
func (e Env) evidence(ctx context.Context, since time.Time) (checker.Verdict, []history.Sale, error) {
	var sales []history.Sale
	for _, r := range e.Replicas {
		got, err := e.at(r.URL).History(ctx, since, e.cell)
		if err != nil {
			return checker.Verdict{}, nil, fmt.Errorf("scenario: the replicas' history: %w", err)
		}
		sales = append(sales, got...)
	}
	return checker.Check(checker.Run{Sales: sales}), sales, nil
}
