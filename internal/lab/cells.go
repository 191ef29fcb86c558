package lab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/history"
	"github.com/locklab/locklab/internal/reason"
	"github.com/locklab/locklab/internal/scenario"
	"github.com/locklab/locklab/internal/versions"
)

// CellResult is one scenario cell as the page shows it: what was expected
// and observed, the detail, and its timeline (its sales' holds and the
// moments of its faults).
type CellResult struct {
	Scenario string `json:"scenario"`
	Lock     string `json:"lock"`
	Expected string `json:"expected"`
	Observed string `json:"observed,omitempty"`
	Detail   string `json:"detail,omitempty"`
	Evidence string `json:"evidence,omitempty"`
	OK       bool   `json:"ok"`
	// Error is the record of why a cell could not run or did not finish,
	// as the code said it; Why says it in a learner's words, a sentence
	// with what to start when another cluster would run it ("Could not
	// run: ..., start make lab."). The page shows Why, the record a click
	// away.
	Error string `json:"error,omitempty"`
	Why   string `json:"why,omitempty"`
	// Reasons are Why, and a "not tested" observation's why, as reasons
	// (code and params): the page says them in its reader's language.
	Reasons []reason.Reason `json:"reasons,omitempty"`
	// Rev orders what the lab says of its cells and runs (summary.Rev).
	Rev     int64          `json:"rev"`
	Fixes   []Fix          `json:"fixes,omitempty"` // faults it could not undo
	Status  string         `json:"status"`          // running, done, failed
	Started time.Time      `json:"started"`
	Ended   time.Time      `json:"ended,omitzero"`
	Holds   []Hold         `json:"holds,omitempty"`
	Marks   []history.Mark `json:"marks,omitempty"`
}

// cells is the lab's scenario runner: the cluster's Env once made, and the
// last result of each cell.
type cells struct {
	mu      sync.Mutex
	env     *scenario.Env
	results map[string]CellResult // by scenario/lock
}

func cellKey(s, lock string) string { return s + "/" + lock }

// scenarios lists the matrix: each scenario, what it injects, what each
// version is expected to do, and each cell's last result.
func (l *Lab) scenarios(w http.ResponseWriter, _ *http.Request) {
	type row struct {
		Name        string            `json:"name"`
		Injected    string            `json:"injected"`
		Requirement string            `json:"requirement,omitempty"`
		Expect      map[string]string `json:"expect"`
		Needs       string            `json:"needs,omitempty"`
	}
	var rows []row
	// The reply's sentences as reasons (needs, why): the page finds each
	// by its text.
	reasons := []reason.Reason{needsSentinel, needsFaults, whyNoHooks, whyNoCluster}
	for _, s := range scenario.All {
		r := row{Name: s.Name, Injected: s.Injected, Requirement: s.Requirement, Expect: s.Expect}
		switch {
		case s.NeedsSentinel:
			r.Needs = needsSentinel.Text
		case s.NeedsFaults:
			r.Needs = needsFaults.Text
		}
		rows = append(rows, r)
	}
	why := l.faultless()
	writeJSON(w, http.StatusOK, map[string]any{"scenarios": rows, "locks": versions.Names(), "results": l.cellStates(),
		"available": why.Text == "", "why": why.Text, "why_no_hooks": whyNoHooks.Text, "why_no_cluster": whyNoCluster.Text, "command": labCommand,
		"outcomes": outcomeCodes, "reasons": reasons})
}

// outcomeCodes names each outcome a cell expects or observes, for the page,
// which says it in its reader's language (its catalogue's outcome.CODE): the
// scenarios' words are English, and the tutorial the lab teaches is Chinese.
// An outcome not named here is shown as the scenario says it.
var outcomeCodes = map[string]string{
	scenario.Oversell: "oversell", scenario.NoOversell: "noOversell", scenario.ForeignDelete: "foreignDelete",
	scenario.NoForeignDelete: "noForeignDelete", scenario.DeletesSuccessor: "deletesSuccessor", scenario.KeepsSuccessor: "keepsSuccessor",
	scenario.WaitsOnItself: "waitsOnItself", scenario.Passes: "passes", scenario.StaleRefused: "staleRefused",
	scenario.Deadlock: "deadlock", scenario.Clean503: "clean503", scenario.KeepsSelling: "keepsSelling",
	scenario.StopsBeforeWrite: "stopsBeforeWrite", scenario.Resumes: "resumes", scenario.WaitsForHolder: "waitsForHolder",
	scenario.ResumesAtOnce: "resumesAtOnce", scenario.ConfirmedLost: "confirmedLost", scenario.NoConfirmedLost: "noConfirmedLost",
	scenario.MovesOn: "movesOn", scenario.OwnCheck: "ownCheck", scenario.AllWoken: "allWoken", scenario.Stranded: "stranded",
	scenario.StrandsCleanly: "strandsCleanly", scenario.HungPastDeadline: "hungPastDeadline", scenario.OtherFailures: "otherFailures",
	scenario.TwoHolders: "twoHolders", scenario.NoTwoHolders: "noTwoHolders",
}

// The lab's words for why no cell can run here, and the command that
// starts the cluster they run on: the one command the page names.
const labCommand = "make lab"

var (
	whyNoCluster  = reason.New("noCluster", "this lab has no local cluster to fault (it was started without one, as the Compose stack starts it)")
	whyNoHooks    = reason.New("noHooks", "the replicas run without their fault hooks (make up starts them so)")
	needsSentinel = reason.New("needsSentinelPass", "Redis Sentinel watching the stock's node: a cluster started with SENTINEL=1 FAULTS=1 (make scenarios' second pass)")
	needsFaults   = reason.New("needsFaults", "the fault proxies and the clock shim: {command} starts them", "command", labCommand)
)

// faultless says why no cell can run on this lab's stack ("": they may):
// it has no local cluster (Config.Cells), or its replicas say on /healthz
// that their fault hooks are off (-chaos false: make up starts them so). A
// replica not heard from yet says nothing: the cell then finds out itself.
func (l *Lab) faultless() reason.Reason {
	if l.cfg.Cells == nil {
		return whyNoCluster
	}
	for _, n := range l.stack.nodes() {
		if n.Kind == "replica" && n.Settings["chaos"] == "false" {
			return whyNoHooks
		}
	}
	return reason.Reason{}
}

// couldNotRun is a cell's failure before any fault: the record (err), and
// why in a learner's words with the command that starts a cluster where it
// runs, when one does (fix: "" when no make lab cluster would).
func couldNotRun(res CellResult, record string, why reason.Reason, fix string) CellResult {
	res.Status, res.Error = "failed", record
	said := reason.New("couldNotRun", "Could not run: {why}.", "why", why.Text)
	if fix != "" {
		said = reason.New("couldNotRunStart", "Could not run: {why}, start {command}.", "why", why.Text, "command", fix)
	}
	res.Why, res.Reasons = said.Text, append(res.Reasons, why, said)
	return res
}

// unfit says in a learner's words why s cannot run against e (as s.Unfit
// found), and the command that starts a cluster where it can.
func unfit(s scenario.Scenario, e scenario.Env) (why reason.Reason, fix string) {
	switch {
	case s.NeedsFaults && e.Faults == nil:
		return reason.New("needsProxies", "it needs the fault proxies, and this cluster was started without them"), labCommand
	case s.NeedsSentinel && len(e.Sentinels) == 0:
		return reason.New("needsSentinel", "it needs Redis Sentinel watching the stock's node, which {command} does not start (make scenarios runs it, in its second pass)", "command", labCommand), ""
	case !s.NeedsSentinel && len(e.Sentinels) > 0:
		return reason.New("noSentinelWanted", "it needs a cluster without Redis Sentinel, and this one has it"), labCommand
	}
	return reason.New("waitsTooShort", "its second sale must wait past the first one's lease, and the replicas give up waiting sooner than that"), labCommand
}

// cellStates is each cell's last result without its timeline (the list
// stays small; GET one cell for its timeline): the matrix's, and the live
// feed's snapshot, so that a page whose feed opens late (refused while
// another page's closed streams still counted, or dropped for being slow)
// learns how a cell it started ended.
func (l *Lab) cellStates() []CellResult {
	l.cells.mu.Lock()
	defer l.cells.mu.Unlock()
	results := make([]CellResult, 0, len(l.cells.results))
	for _, c := range l.cells.results {
		c.Holds, c.Marks = nil, nil
		results = append(results, c)
	}
	return results
}

// cell is one cell's last result, with its timeline.
func (l *Lab) cell(w http.ResponseWriter, r *http.Request) {
	l.cells.mu.Lock()
	c, ok := l.cells.results[cellKey(r.PathValue("scenario"), r.PathValue("lock"))]
	l.cells.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "that cell has not run yet")
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// runCell starts one scenario cell (202), with the same one-at-a-time rule
// as runs (409). Its faults are undone whatever happens: the scenario heals
// each on its way out, and a lab that stops cancels the cell and waits.
func (l *Lab) runCell(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Scenario string `json:"scenario"`
		Lock     string `json:"lock"`
	}
	if err := decode(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	i := slices.IndexFunc(scenario.All, func(s scenario.Scenario) bool { return s.Name == req.Scenario })
	if i < 0 {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf("scenario %q: no such scenario", req.Scenario))
		return
	}
	s := scenario.All[i]
	if _, ok := s.Expect[req.Lock]; !ok {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf("%s has no cell for %q", s.Name, req.Lock))
		return
	}
	if why := l.faultless(); why.Text != "" {
		writeError(w, http.StatusServiceUnavailable, "no_cells", "Could not run: "+why.Text+", start "+labCommand+".")
		return
	}
	res := CellResult{Scenario: s.Name, Lock: req.Lock, Expected: s.Expect[req.Lock], Status: "running", Started: time.Now()}
	ctx, done, ok := l.claim(w, "cell", cellKey(s.Name, req.Lock))
	if !ok {
		return
	}
	reply := l.setCell(res)
	go func() {
		defer done()
		l.setCell(l.execCell(ctx, s, reply))
	}()
	// The cell may have ended, and its event gone out, before this reply
	// is written: the page keeps what has the higher Rev.
	writeJSON(w, http.StatusAccepted, reply)
}

// execCell runs cell res of s, and returns how it ended (Ended set, on
// every return: a named result, which the deferred stamp reaches).
func (l *Lab) execCell(ctx context.Context, s scenario.Scenario, res CellResult) (out CellResult) {
	defer func() { out.Ended = time.Now() }()
	env, err := l.env(ctx)
	switch {
	case errors.Is(err, scenario.ErrNoFaultHooks):
		return couldNotRun(res, err.Error(), whyNoHooks, labCommand)
	case err != nil:
		return couldNotRun(res, err.Error(), reason.New("noState", "the lab could not read the local cluster's state"), labCommand)
	}
	if record := s.Unfit(env); record != "" {
		why, fix := unfit(s, env)
		return couldNotRun(res, s.Name+" "+record, why, fix)
	}
	if why := env.LacksWhy(res.Lock); why.Text != "" {
		return couldNotRun(res, why.Text, why, labCommand)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c, err := s.Run(ctx, env, res.Lock)
	if err != nil {
		res.Status, res.Error, res.Fixes = "failed", err.Error(), l.fixes(err)
		why := reason.New("didNotFinishError", "It did not finish: it stopped with an error before it could say what the lock did.")
		if errors.Is(err, context.Canceled) {
			why = reason.New("didNotFinishStopped", "It did not finish: it was stopped.")
		}
		res.Why, res.Reasons = why.Text, append(res.Reasons, why)
		return res
	}
	res.Status, res.Observed, res.Detail, res.Evidence, res.OK, res.Marks = "done", c.Observed, c.Detail, c.Evidence, c.OK(), c.Marks
	res.Reasons = append(res.Reasons, c.Reasons...)
	for _, sale := range c.Sales {
		if h, ok := holdOf(res.Lock, sale); ok {
			res.Holds = append(res.Holds, h)
		}
	}
	markOverlaps(res.Holds)
	return res
}

// env is the cluster's scenario Env, made on first use.
func (l *Lab) env(ctx context.Context) (scenario.Env, error) {
	l.cells.mu.Lock()
	defer l.cells.mu.Unlock()
	if l.cells.env != nil {
		return *l.cells.env, nil
	}
	env, err := l.cfg.Cells(ctx)
	if err != nil {
		return env, err
	}
	l.cells.env = &env
	return env, nil
}

// setCell keeps c as its cell's last result, stamped with the next Rev,
// and tells the pages; it returns c as stamped.
func (l *Lab) setCell(c CellResult) CellResult {
	l.cells.mu.Lock()
	if l.cells.results == nil {
		l.cells.results = map[string]CellResult{}
	}
	c.Rev = l.rev.Add(1)
	l.cells.results[cellKey(c.Scenario, c.Lock)] = c
	l.cells.mu.Unlock()
	l.publish("cell", c)
	return c
}

func (l *Lab) closeCells() {
	l.cells.mu.Lock()
	defer l.cells.mu.Unlock()
	if l.cells.env != nil {
		_ = l.cells.env.Close()
		l.cells.env = nil
	}
}

// Fix is a fault a cell or a run left in place: the node, what is left
// (scenario's Left constants), why its undo failed, and how to fix it by hand.
type Fix struct {
	Node string `json:"node"`
	Left string `json:"left"`
	Why  string `json:"why"`
	How  string `json:"how,omitempty"`
}

// fixes lists what err says was not undone, each with its fix, and logs it:
// the one thing a run's failure must never hide.
func (l *Lab) fixes(err error) []Fix {
	var out []Fix
	for _, n := range scenario.NotUndoneIn(err) {
		f := Fix{Node: n.Node, Left: n.Left, Why: n.Err.Error()}
		if l.cfg.FixByHand != nil {
			f.How = l.cfg.FixByHand(n)
		}
		l.cfg.Log.Error("a fault was not undone: fix it by hand", "node", f.Node, "left", f.Left, "err", f.Why, "fix", f.How)
		out = append(out, f)
	}
	return out
}
