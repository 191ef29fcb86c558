package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/checker"
	"github.com/locklab/locklab/internal/loadtest"
	"github.com/locklab/locklab/internal/scenario"
	"github.com/locklab/locklab/internal/versions"
)

// nemesisResult is one version's run under the nemesis.
type nemesisResult struct {
	Lock   string `json:"lock"`
	Wait   string `json:"wait,omitempty"` // how v3-v8 waited (-wait); empty: the replicas' own
	Fenced bool   `json:"fenced"`
	Seed   uint64 `json:"seed"`
	// Faults counts the schedule's faults that hit a process this run's
	// sales used (scenario.Env.Uses), not the whole schedule.
	Faults   int `json:"faults"`
	Requests int `json:"requests"`
	Sold     int `json:"sold"`
	Refused  int `json:"fenced_refused"`
	Failed   int `json:"failed"` // sold nothing, known
	Unknown  int `json:"unknown"`
	// NotServed is Failed + Unknown: requests the run got no answer to
	// that says what the stock did.
	NotServed int `json:"not_served"`
	checker.Verdict
	// HistoryNote says why the replicas' history was not read, or why
	// what was read is incomplete (a replica killed mid-run lost it): then
	// HistoryChecked is false, and two holders and lost updates show "-".
	HistoryNote string `json:"history_note,omitempty"`
	// NotTested lists why the run cannot pass (no history, nothing sold,
	// under half the requests served, no fault on its processes): a run
	// with any fails the nemesis's exit status.
	NotTested []string `json:"not_tested,omitempty"`
	// Violation says the stock was harmed: a lost update, an oversell, or
	// a history no counter could give. FirstAfter is when, after the start,
	// the first lost update's later write landed (0: none, or only the
	// counter's check saw it).
	Violation  bool    `json:"violation"`
	FirstAfter float64 `json:"first_violation_after_s,omitempty"`
}

// runNemesis keeps a steady load on each version (once per -wait, as the
// load test runs them) for -duration while the seeded schedule of faults
// hits the processes those versions use, and lets the checker decide.
func runNemesis(ctx context.Context, o options, stdout, stderr io.Writer) int {
	if _, err := nemesisRuns(o); err != nil { // before the cluster: nothing to connect to for a refusal
		fmt.Fprintln(stderr, "loadtest: -nemesis:", err)
		return 2
	}
	env, _, err := scenarioEnv(ctx, &o) // the admin token too, from the local cluster's state
	if err != nil {
		fmt.Fprintln(stderr, "loadtest:", err)
		return 1
	}
	defer env.Close()
	cfg := o.cfg
	if cfg.Rate == 0 {
		cfg.Rate = scenario.NemesisRate
	}
	cfg.Requests = int(cfg.Rate*cfg.Duration.Seconds()) + 1
	cfg.Stock = int64(cfg.Requests) // never sold out: every sale tests the lock
	o.cfg = cfg                     // the runs' load, and the report's header
	runs, _ := nemesisRuns(o)
	faults := env.Schedule(o.seed, cfg.Duration, o.locks...)
	fmt.Fprintf(stderr, "nemesis: seed %d, %d faults over %s, load %.0f sales/s (lease %s):\n", o.seed, len(faults), cfg.Duration, cfg.Rate, env.TTL)
	for _, f := range faults {
		fmt.Fprintln(stderr, "  "+f.String())
	}
	var results []loadtest.Result
	var rows []nemesisResult
	for _, run := range runs {
		start := time.Now()
		var res loadtest.Result
		got, err := env.UnderNemesis(ctx, run.lock, faults, run.cfg.Rate, func(s string) { fmt.Fprintln(stderr, s) },
			func(ctx context.Context, hooks func(int64) string) (err error) {
				c := run.cfg
				c.Hooks = hooks
				res, err = loadtest.Run(ctx, c, run.lock)
				return err
			})
		if err != nil {
			fmt.Fprintf(stderr, "loadtest: -nemesis %s: %v\n", lockName(run.lock), err)
			return 1
		}
		res.Marks = got
		results = append(results, res)
		rows = append(rows, judge(res, o, faults, used(env, res), start))
	}
	printRows(stdout, o.json, rows, nemesisHeader, nemesisLine)
	for _, r := range rows {
		if r.NotLinearizable != "" && !o.json {
			fmt.Fprintf(stdout, "%s: no counter gives this history (%s): %s\n", r.label(), r.LinearizabilityBy, r.NotLinearizable)
		}
		if r.HistoryNote != "" && !o.json {
			fmt.Fprintf(stdout, "%s: %s\n", r.label(), r.HistoryNote)
		}
	}
	if o.out != "" {
		o.notes = append(o.notes, fmt.Sprintf("-nemesis: seed %d, %d faults over %s (each drawn on the timelines below), a steady %.0f sales/s, fencing %s.",
			o.seed, len(faults), cfg.Duration, cfg.Rate, map[bool]string{false: "off", true: "on"}[cfg.Fence]))
		if err := writeReport(o, results); err != nil {
			fmt.Fprintln(stderr, "loadtest:", err)
			return 1
		}
		fmt.Fprintln(stderr, "loadtest: report written to", o.out)
	}
	status := 0
	for _, r := range rows {
		switch {
		case len(r.NotTested) > 0: // whatever was expected: this run cannot say
			fmt.Fprintf(stderr, "loadtest: -nemesis: %s not tested: %s\n", r.label(), strings.Join(r.NotTested, "; "))
			status = 1
		case o.expectSafe && r.Violation:
			fmt.Fprintf(stderr, "loadtest: -expect-safe: %s harmed the stock under the nemesis\n", r.label())
			status = 1
		case o.expectUnsafe && !r.Violation:
			fmt.Fprintf(stderr, "loadtest: -expect-unsafe: the nemesis found no violation for %s\n", r.label())
			status = 1
		}
	}
	return status
}

// nemesisRuns are the nemesis's runs: each version, and each one that
// waits as -wait says once per wait, as the load test runs them. A -wait
// that no chosen version uses (etcd, zk, redlock and the libraries wait
// their own way) is refused: it would run as if it had not been given.
func nemesisRuns(o options) ([]oneRun, error) {
	runs := o.runs()
	if o.waitList != "" && !slices.ContainsFunc(runs, func(r oneRun) bool { return r.cfg.Wait != "" }) {
		return nil, fmt.Errorf("-wait %s: none of %s waits as -wait says (only %s do; the others wait their own way)",
			o.waitList, strings.Join(o.locks, ", "), strings.Join(waitingVersions(), " "))
	}
	return runs, nil
}

// waitingVersions are the versions -wait reaches.
func waitingVersions() []string {
	var names []string
	for _, v := range versions.All {
		if v.Wait {
			names = append(names, v.Name)
		}
	}
	return names
}

// used are the processes res's sales used: its lock's servers, the stock's
// node, and the replicas that served it.
func used(env scenario.Env, res loadtest.Result) []string {
	return slices.DeleteFunc(env.Uses(res.Lock), func(p string) bool {
		return isReplica(env, p) && res.Replicas[p] == 0
	})
}

func isReplica(env scenario.Env, name string) bool {
	return name == env.Replicas[0].Name || name == env.Replicas[1].Name
}

const nemesisHeader = "lock\tfenced\tfaults\tsold\trefused\tfailed\tunknown\tnot served\ttwo holders\tlost updates\tlinearizable\tviolation\tverdict"

// nemesisLine is one row of the nemesis's table: "-" for what the history
// would have said when it was not read (or is incomplete), and the verdict
// "not tested: why" for a run that cannot pass.
func nemesisLine(r nemesisResult) string {
	v := "none"
	if r.Violation {
		v = "yes"
		if r.FirstAfter > 0 {
			v += fmt.Sprintf(", first after %.1f s", r.FirstAfter)
		}
	} else if len(r.NotTested) > 0 {
		v = "-" // no violation seen, in a run that could not look
	}
	evidence := func(n int) string {
		if !r.HistoryChecked {
			return "-"
		}
		return strconv.Itoa(n)
	}
	holders := evidence(r.TwoHolders)
	if r.Holds == 0 { // no sale held a lock: the version has none
		holders = "-"
	}
	verdict := "ok"
	if len(r.NotTested) > 0 {
		verdict = "not tested: " + strings.Join(r.NotTested, "; ")
	}
	return fmt.Sprintf("%s\t%v\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s", r.label(), r.Fenced, r.Faults, r.Sold, r.Refused, r.Failed, r.Unknown,
		r.NotServed, holders, evidence(r.LostUpdates), cmp.Or(r.Linearizability, "-"), v, verdict)
}

// label names the run as the load test does: "v6 handoff".
func (r nemesisResult) label() string { return strings.TrimSpace(r.Lock + " " + r.Wait) }

// judge sums one version's run up: a violation is a lost update, an
// oversell (even at its lowest), or a history no counter could give; its
// faults are those of the schedule that hit a process it used (procs). The run is not tested
// when its history was not read or is incomplete (a replica that served it
// was killed: its history went with it), when it sold nothing, when under
// half its requests were served, or when no fault touched it.
func judge(res loadtest.Result, o options, faults []scenario.Fault, procs []string, start time.Time) nemesisResult {
	r := nemesisResult{Lock: res.Lock, Wait: res.Wait, Fenced: o.cfg.Fence, Seed: o.seed, Faults: scenario.Touching(faults, procs), Requests: res.Requests,
		Sold: res.Sold, Refused: res.Fenced, Failed: res.Failed, Unknown: res.Verdict.Unknown, NotServed: res.NotServed(),
		Verdict: res.Verdict, HistoryNote: res.HistoryNote}
	r.Violation = res.LostUpdates > 0 || res.OversoldMin > 0 || res.Linearizability == "violated"
	if killed := scenario.KilledReplicas(faults, served(res)); r.HistoryChecked && len(killed) > 0 {
		var which []string
		for _, f := range killed {
			which = append(which, fmt.Sprintf("%s at %.1f s", f.Target, f.At.Seconds()))
		}
		r.HistoryChecked = false
		r.HistoryNote = fmt.Sprintf("the replicas' history is incomplete: killed (%s), a replica comes back with none of the sales it served before",
			strings.Join(which, ", "))
	}
	if !r.HistoryChecked {
		r.NotTested = append(r.NotTested, cmp.Or(r.HistoryNote, "the replicas' history was not read"))
	}
	if r.Sold == 0 {
		r.NotTested = append(r.NotTested, "nothing sold")
	} else if n := r.Requests - r.NotServed; 2*n < r.Requests {
		r.NotTested = append(r.NotTested, fmt.Sprintf("%d of %d requests served (under half)", n, r.Requests))
	}
	if r.Faults == 0 {
		r.NotTested = append(r.NotTested, "no fault hit a process it used")
	}
	written := map[string]time.Time{}
	for _, s := range res.Sales {
		if s.Status == 200 {
			written[s.ID] = s.Written.At
		}
	}
	var first time.Time
	for _, p := range res.Lost { // the later write of each pair is the lost one
		w := later(written[p.A.ID], written[p.B.ID])
		if !w.IsZero() && (first.IsZero() || w.Before(first)) {
			first = w
		}
	}
	if !first.IsZero() {
		r.FirstAfter = first.Sub(start).Seconds()
	}
	return r
}

// served are the replicas that answered some of res's requests.
func served(res loadtest.Result) []string {
	var names []string
	for name, n := range res.Replicas {
		if n > 0 {
			names = append(names, name)
		}
	}
	return names
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
