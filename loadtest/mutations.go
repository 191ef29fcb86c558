package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/docgen"
	"github.com/locklab/locklab/internal/scenario"
)

// mutated is one mutation's run: the held cell, its fix off, what it showed.
type mutated struct {
	scenario.Mutation
	Observed string `json:"observed"`
	Detail   string `json:"detail"`
	Mark     string `json:"mark"`
}

// Marks of a mutation's row: only FLAW SHOWN is a pass.
const (
	markShown     = "FLAW SHOWN"
	markHolds     = "STILL HOLDS"
	markNotTested = "NOT TESTED"
	markNoSwitch  = "NO SWITCH"
	markError     = "ERROR"
	markDisagrees = "HISTORY DISAGREES"
	// markOther: a flaw, but not the one the unfixed sibling shows
	// (Mutation.Flaw): the cell did not show what its fix is there to stop.
	markOther = "OTHER FLAW"
)

// runMutations runs, for each chosen cell expected to hold, the same cell
// with its fix switched off (scenario.Mutations), prints cell, fix off and
// what was observed, and exits 1 unless every one showed its flaw: a cell
// that holds with its fix off, or has no switch, is not shown able to fail.
func runMutations(ctx context.Context, o options, stdout, stderr io.Writer) int {
	env, h, err := scenarioEnv(ctx, &o)
	if err != nil {
		fmt.Fprintln(stderr, "loadtest:", err)
		return 1
	}
	defer env.Close()
	var rows []mutated
	for s := range onStack(o, stderr) {
		if why := s.Unfit(env); why != "" {
			if o.scenario != "all" || why == s.Refuses(env) {
				fmt.Fprintf(stderr, "loadtest: %s cannot run on this cluster: it %s\n", s.Name, why)
				return 1
			}
			continue // the other pass's
		}
		for _, m := range scenario.Mutations(s, appliesTo(s, o.locks)) {
			r := mutated{Mutation: m}
			switch {
			case m.Missing != "":
				r.Mark, r.Detail = markNoSwitch, m.Missing
			case env.Lacks(m.As) != "":
				r.Mark, r.Detail = markError, env.Lacks(m.As)
			default:
				c, err := m.Run(ctx, env)
				switch {
				case err != nil:
					r.Mark, r.Detail = markError, err.Error()
				case c.NotTested():
					r.Mark, r.Observed, r.Detail = markNotTested, c.Observed, c.Detail
				case c.Evidence != "": // what it observed, its history contradicts
					r.Mark, r.Observed, r.Detail = markDisagrees, c.Observed, c.Detail+evidence(c)
				case m.Shows(c):
					r.Mark, r.Observed, r.Detail = markShown, c.Observed, c.Detail
				case m.Flaw != "" && !slices.Contains(scenario.Held, c.Observed):
					r.Mark, r.Observed, r.Detail = markOther, c.Observed, fmt.Sprintf("want %q; %s", m.Flaw, c.Detail)
				default:
					r.Mark, r.Observed, r.Detail = markHolds, c.Observed, c.Detail+evidence(c)
				}
			}
			if m.Missing == "" {
				fmt.Fprintf(stderr, "loadtest: %s, %s, %s switched off: %s\n", m.Scenario, m.Lock, m.Fix, r.Mark)
			} else {
				fmt.Fprintf(stderr, "loadtest: %s, %s: %s\n", m.Scenario, m.Lock, r.Mark)
			}
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		fmt.Fprintf(stderr, "loadtest: -mutate -scenario %s with -lock %s: no cell of them is expected to hold on this cluster\n", o.scenario, o.lockList)
		return 1
	}
	printRows(stdout, o.json, rows, "scenario\tlock\tfix off\truns as\tobserved\t\tdetail", func(r mutated) string {
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", r.Scenario, r.Lock, r.Fix, runsAs(r.Mutation), r.Observed, r.Mark, r.Detail)
	})
	if o.doc != "" {
		if err := writeMutations(o.doc, rows, h.Settings, len(env.Sentinels) > 0); err != nil {
			fmt.Fprintln(stderr, "loadtest:", err)
			return 1
		}
		fmt.Fprintln(stderr, "loadtest: mutations written to", o.doc)
	}
	failed := 0
	for _, r := range rows {
		if r.Mark != markShown {
			failed++
		}
	}
	if failed > 0 {
		fmt.Fprintf(stderr, "loadtest: %d of %d cells not shown able to fail (each must show its flaw with its fix off)\n", failed, len(rows))
		return 1
	}
	return 0
}

// runsAs says what a mutation ran: the scenario and lock, with its off= hook.
func runsAs(m scenario.Mutation) string {
	if m.Missing != "" {
		return "-"
	}
	s := m.Runs + " " + m.As
	if m.Off != "" {
		s += " off=" + m.Off
	}
	return s
}

// writeMutations writes the mutations' table into file's generated section
// mutations-observed (mutations-observed-sentinel on a cluster Sentinel
// watches).
func writeMutations(file string, rows []mutated, settings map[string]string, sentinel bool) error {
	var b strings.Builder
	b.WriteString("| cell | lock | fix switched off | ran | observed | |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		observed := r.Observed
		if observed == "" {
			observed = r.Detail
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %s | %s |\n", r.Scenario, r.Lock, r.Fix, runsAs(r.Mutation), strings.ReplaceAll(observed, "|", "/"), r.Mark)
	}
	section, cluster := "mutations-observed", ""
	if sentinel {
		section, cluster = "mutations-observed-sentinel", " on the cluster Redis Sentinel watches (SENTINEL=1)"
	}
	fmt.Fprintf(&b, "\nObserved by `make mutations` on %s (%d cores)%s: replicas with -ttl %s, -acquire-timeout %s.\n",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), cluster, settings["ttl"], settings["acquire_timeout"])
	return docgen.Replace(file, section, b.String())
}
