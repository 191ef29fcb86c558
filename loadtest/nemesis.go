package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/locklab/locklab/internal/checker"
	"github.com/locklab/locklab/internal/loadtest"
	"github.com/locklab/locklab/internal/scenario"
)

// nemesisResult is one version's run under the nemesis.
type nemesisResult struct {
	Lock    string `json:"lock"`
	Fenced  bool   `json:"fenced"`
	Seed    uint64 `json:"seed"`
	Faults  int    `json:"faults"`
	Sold    int    `json:"sold"`
	Refused int    `json:"fenced_refused"`
	Unknown int    `json:"unknown"`
	checker.Verdict
	// Violation says the stock was harmed: a lost update, an oversell, or
	// a history no counter could give. FirstAfter is when, after the start,
	// the first lost update's later write landed (0: none, or only the
	// counter's check saw it).
	Violation  bool    `json:"violation"`
	FirstAfter float64 `json:"first_violation_after_s,omitempty"`
}

// runNemesis keeps a steady load on each version for -duration while the
// seeded schedule of faults hits the cluster, and lets the checker decide.
func runNemesis(ctx context.Context, o options, stdout, stderr io.Writer) int {
	env, _, err := scenarioEnv(ctx, &o)
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
	faults := env.Schedule(o.seed, cfg.Duration)
	fmt.Fprintf(stderr, "nemesis: seed %d, %d faults over %s, load %.0f sales/s (lease %s):\n", o.seed, len(faults), cfg.Duration, cfg.Rate, env.TTL)
	for _, f := range faults {
		fmt.Fprintln(stderr, "  "+f.String())
	}
	var results []loadtest.Result
	var rows []nemesisResult
	for _, lock := range o.locks {
		start := time.Now()
		var res loadtest.Result
		got, err := env.UnderNemesis(ctx, lock, faults, cfg.Rate, func(s string) { fmt.Fprintln(stderr, s) },
			func(ctx context.Context, hooks func(int64) string) (err error) {
				cfg.Hooks = hooks
				res, err = loadtest.Run(ctx, cfg, lock)
				return err
			})
		if err != nil {
			fmt.Fprintf(stderr, "loadtest: -nemesis %s: %v\n", lock, err)
			return 1
		}
		res.Marks = got
		results = append(results, res)
		rows = append(rows, judge(res, o, len(faults), start))
	}
	printRows(stdout, o.json, rows, "lock\tfenced\tfaults\tsold\trefused\tunknown\ttwo holders\tlost updates\tlinearizable\tviolation", func(r nemesisResult) string {
		v := "none"
		if r.Violation {
			v = "yes"
			if r.FirstAfter > 0 {
				v += fmt.Sprintf(", first after %.1f s", r.FirstAfter)
			}
		}
		return fmt.Sprintf("%s\t%v\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s", r.Lock, r.Fenced, r.Faults, r.Sold, r.Refused, r.Unknown,
			r.TwoHolders, r.LostUpdates, r.Linearizability, v)
	})
	for _, r := range rows {
		if r.NotLinearizable != "" && !o.json {
			fmt.Fprintf(stdout, "%s: no counter gives this history (%s): %s\n", r.Lock, r.LinearizabilityBy, r.NotLinearizable)
		}
	}
	if o.out != "" {
		o.notes = append(o.notes, fmt.Sprintf("-nemesis: seed %d, %d faults over %s (each drawn on the timelines below), a steady %.0f sales/s, fencing %s.",
			o.seed, len(faults), cfg.Duration, cfg.Rate, map[bool]string{false: "off", true: "on"}[cfg.Fence]))
		o.cfg = cfg // the report's header: the load that ran
		if err := writeReport(o, results); err != nil {
			fmt.Fprintln(stderr, "loadtest:", err)
			return 1
		}
		fmt.Fprintln(stderr, "loadtest: report written to", o.out)
	}
	for _, r := range rows {
		switch {
		case o.expectSafe && r.Violation:
			fmt.Fprintf(stderr, "loadtest: -expect-safe: %s harmed the stock under the nemesis\n", r.Lock)
			return 1
		case o.expectUnsafe && !r.Violation:
			fmt.Fprintf(stderr, "loadtest: -expect-unsafe: the nemesis found no violation for %s\n", r.Lock)
			return 1
		}
	}
	return 0
}

// judge sums one version's run up: a violation is a lost update, an
// oversell (even at its lowest), or a history no counter could give.
func judge(res loadtest.Result, o options, faults int, start time.Time) nemesisResult {
	r := nemesisResult{Lock: res.Lock, Fenced: o.cfg.Fence, Seed: o.seed, Faults: faults, Sold: res.Sold, Refused: res.Fenced,
		Unknown: res.Verdict.Unknown, Verdict: res.Verdict}
	r.Violation = res.LostUpdates > 0 || res.OversoldMin > 0 || res.Linearizability == "violated"
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

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
