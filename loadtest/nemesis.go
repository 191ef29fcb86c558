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

	"github.com/locklab/locklab/internal/loadtest"
	"github.com/locklab/locklab/internal/scenario"
	"github.com/locklab/locklab/internal/versions"
)

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
	var rows []scenario.NemesisRow
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
		row := scenario.JudgeNemesis(res, o.cfg.Fence, o.seed, faults, env.Used(res), start)
		res.Faults, res.HistoryChecked, res.HistoryNote = row.Faults, row.HistoryChecked, row.HistoryNote // a killed replica's history: incomplete
		results = append(results, res)
		rows = append(rows, row)
	}
	printRows(stdout, o.json, rows, nemesisHeader, nemesisLine)
	for _, r := range rows {
		if r.NotLinearizable != "" && !o.json {
			fmt.Fprintf(stdout, "%s: no counter gives this history (%s): %s\n", r.Label(), r.LinearizabilityBy, r.NotLinearizable)
		}
		if r.HistoryNote != "" && !o.json {
			fmt.Fprintf(stdout, "%s: %s\n", r.Label(), r.HistoryNote)
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
			fmt.Fprintf(stderr, "loadtest: -nemesis: %s not tested: %s\n", r.Label(), strings.Join(r.NotTested, "; "))
			status = 1
		case o.expectSafe && r.Violation:
			fmt.Fprintf(stderr, "loadtest: -expect-safe: %s harmed the stock under the nemesis\n", r.Label())
			status = 1
		case o.expectUnsafe && !r.Violation:
			fmt.Fprintf(stderr, "loadtest: -expect-unsafe: the nemesis found no violation for %s\n", r.Label())
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

const nemesisHeader = "lock\tfenced\tfaults\tsold\trefused\tfailed\tunknown\tnot served\ttwo holders\tlost updates\tlinearizable\tviolation\tverdict"

// nemesisLine is one row of the nemesis's table: "-" for what the history
// would have said when it was not read (or is incomplete), and the verdict
// "not tested: why" for a run that cannot pass.
func nemesisLine(r scenario.NemesisRow) string {
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
	return fmt.Sprintf("%s\t%v\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s", r.Label(), r.Fenced, r.Faults, r.Sold, r.Refused, r.Failed, r.Unknown,
		r.NotServed, holders, evidence(r.LostUpdates), cmp.Or(r.Linearizability, "-"), v, verdict)
}
