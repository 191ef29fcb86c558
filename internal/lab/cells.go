package lab

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/history"
	"github.com/locklab/locklab/internal/scenario"
	"github.com/locklab/locklab/internal/versions"
)

// CellResult is one scenario cell as the page shows it: what was expected
// and observed, the detail, and its timeline (its sales' holds and the
// moments of its faults).
type CellResult struct {
	Scenario string         `json:"scenario"`
	Lock     string         `json:"lock"`
	Expected string         `json:"expected"`
	Observed string         `json:"observed,omitempty"`
	Detail   string         `json:"detail,omitempty"`
	Evidence string         `json:"evidence,omitempty"`
	OK       bool           `json:"ok"`
	Error    string         `json:"error,omitempty"`
	Fixes    []Fix          `json:"fixes,omitempty"` // faults it could not undo
	Status   string         `json:"status"`          // running, done, failed
	Started  time.Time      `json:"started"`
	Ended    time.Time      `json:"ended,omitzero"`
	Holds    []Hold         `json:"holds,omitempty"`
	Marks    []history.Mark `json:"marks,omitempty"`
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
		Name     string            `json:"name"`
		Injected string            `json:"injected"`
		Expect   map[string]string `json:"expect"`
		Needs    string            `json:"needs,omitempty"`
	}
	var rows []row
	for _, s := range scenario.All {
		r := row{Name: s.Name, Injected: s.Injected, Expect: s.Expect}
		switch {
		case s.NeedsSentinel:
			r.Needs = "Redis Sentinel watching the stock's node: a cluster started with SENTINEL=1 FAULTS=1 (make scenarios' second pass)"
		case s.NeedsFaults:
			r.Needs = "the fault proxies and the clock shim: make lab starts them"
		}
		rows = append(rows, r)
	}
	l.cells.mu.Lock()
	results := make([]CellResult, 0, len(l.cells.results))
	for _, c := range l.cells.results {
		c.Holds, c.Marks = nil, nil // the list stays small; GET one cell for its timeline
		results = append(results, c)
	}
	l.cells.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"scenarios": rows, "locks": versions.Names(), "results": results,
		"available": l.cfg.Cells != nil})
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
	if l.cfg.Cells == nil {
		writeError(w, http.StatusServiceUnavailable, "no_cells", "this lab runs no scenario cells: it needs the local cluster's run directory (make lab)")
		return
	}
	res := CellResult{Scenario: s.Name, Lock: req.Lock, Expected: s.Expect[req.Lock], Status: "running", Started: time.Now()}
	ctx, done, ok := l.claim(w, "cell", cellKey(s.Name, req.Lock))
	if !ok {
		return
	}
	l.setCell(res)
	go func() {
		defer done()
		res = l.execCell(ctx, s, res)
		l.setCell(res)
	}()
	writeJSON(w, http.StatusAccepted, res)
}

func (l *Lab) execCell(ctx context.Context, s scenario.Scenario, res CellResult) CellResult {
	defer func() { res.Ended = time.Now() }()
	env, err := l.env(ctx)
	if err != nil {
		res.Status, res.Error = "failed", err.Error()
		return res
	}
	if why := s.Unfit(env); why != "" {
		res.Status, res.Error = "failed", s.Name+" "+why
		return res
	}
	if why := env.Lacks(res.Lock); why != "" {
		res.Status, res.Error = "failed", why
		return res
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c, err := s.Run(ctx, env, res.Lock)
	if err != nil {
		res.Status, res.Error, res.Fixes = "failed", err.Error(), l.fixes(err)
		return res
	}
	res.Status, res.Observed, res.Detail, res.Evidence, res.OK, res.Marks = "done", c.Observed, c.Detail, c.Evidence, c.OK(), c.Marks
	for _, sale := range c.Sales {
		if h, ok := holdOf(res.Lock, sale); ok {
			res.Holds = append(res.Holds, h)
		}
	}
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

func (l *Lab) setCell(c CellResult) {
	l.cells.mu.Lock()
	if l.cells.results == nil {
		l.cells.results = map[string]CellResult{}
	}
	l.cells.results[cellKey(c.Scenario, c.Lock)] = c
	l.cells.mu.Unlock()
	l.publish("cell", c)
}

func (l *Lab) closeCells() {
	l.cells.mu.Lock()
	defer l.cells.mu.Unlock()
	if l.cells.env != nil {
		_ = l.cells.env.Close()
		l.cells.env = nil
	}
}
