package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/cluster"
	"github.com/locklab/locklab/internal/docgen"
	"github.com/locklab/locklab/internal/loadtest"
	"github.com/locklab/locklab/internal/scenario"
	"github.com/locklab/locklab/internal/scenario/stores"
	"github.com/locklab/locklab/internal/versions"
)

func scenarioNames() string { return strings.Join(scenario.Names(), ", ") }

// runScenarios runs the chosen scenarios against every chosen version they
// apply to, prints expected against observed, and exits 1 if any differ.
func runScenarios(ctx context.Context, o options, stdout, stderr io.Writer) int {
	env, h, err := scenarioEnv(ctx, &o)
	if err != nil {
		fmt.Fprintln(stderr, "loadtest:", err)
		return 1
	}
	defer env.Close()
	settings := h.Settings

	var cells []scenario.Cell
	unfit := map[string][]string{} // why -> the scenarios skipped for it
	defer func() {
		for why, names := range unfit {
			fmt.Fprintf(stderr, "loadtest: skipped on this cluster (each %s): %s\n", why, strings.Join(names, ", "))
		}
	}()
	// A scenario whose cells this cluster's settings would leave untested
	// (B gives up before A's lease ends) refuses the whole run before any
	// fault, under -scenario all too, where Unfit alone only skips it.
	// (Only those that would run here: a Sentinel pass leaves slow-holder
	// to the first.)
	for _, s := range chosen(o.scenario) {
		onCompose, _ := s.OnCompose()
		if why := s.Refuses(env); why != "" && s.Unfit(env) == why && (o.compose == "" || onCompose) && len(appliesTo(s, o.locks)) > 0 {
			fmt.Fprintf(stderr, "loadtest: scenario %s %s\n", s.Name, why)
			return 1
		}
	}
	for s := range onStack(o, stderr) {
		if why := s.Unfit(env); why != "" {
			unfit[why] = append(unfit[why], s.Name)
			continue
		}
		for _, lock := range appliesTo(s, o.locks) {
			if why := env.Lacks(lock); why != "" {
				fmt.Fprintf(stderr, "loadtest: scenario %s, %s skipped: %s\n", s.Name, lock, why)
				continue
			}
			c, err := s.Run(ctx, env, lock)
			if err != nil {
				fmt.Fprintf(stderr, "loadtest: scenario %s, %s: %v\n", s.Name, lock, err)
				return 1
			}
			cells = append(cells, c)
		}
	}
	// A scenario asked for by name that this cluster cannot run, or a
	// cluster that runs none of them, is an error: a first pass started on
	// the Sentinel cluster (or the other way round) must not pass unseen.
	if len(unfit) > 0 && (o.scenario != "all" || len(cells) == 0) {
		for why, names := range unfit {
			fmt.Fprintf(stderr, "loadtest: %s cannot run on this cluster: it %s\n", strings.Join(names, ", "), why)
		}
		clear(unfit) // said: not again as skipped
		return 1
	}
	if len(cells) == 0 { // each skipped, saying why: that is not a pass
		fmt.Fprintf(stderr, "loadtest: -scenario %s with -lock %s ran no cell on this cluster (skipped, above)\n", o.scenario, o.lockList)
		return 1
	}
	printRows(stdout, o.json, cells, "scenario\tlock\texpected\tobserved\t\tdetail", func(c scenario.Cell) string {
		mark := "ok"
		switch {
		case c.NotTested(): // its fault did not hit: no verdict either way
			mark = "NOT TESTED"
		case !c.OK():
			mark = "DIFFERS"
		}
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s%s", c.Scenario, c.Lock, c.Expected, c.Observed, mark, c.Detail, evidence(c))
	})
	if o.out != "" {
		if len(env.Sentinels) > 0 { // make scenarios' second pass: beside the first's report
			ext := filepath.Ext(o.out)
			o.out = strings.TrimSuffix(o.out, ext) + "-sentinel" + ext
		}
		if err := writeScenarioReport(o, cells, settings); err != nil {
			fmt.Fprintln(stderr, "loadtest:", err)
			return 1
		}
		fmt.Fprintln(stderr, "loadtest: report written to", o.out)
	}
	if o.doc != "" {
		if err := writeMatrix(o.doc, cells, settings, len(env.Sentinels) > 0); err != nil {
			fmt.Fprintln(stderr, "loadtest:", err)
			return 1
		}
		fmt.Fprintln(stderr, "loadtest: matrix written to", o.doc)
	}
	if i := slices.IndexFunc(cells, func(c scenario.Cell) bool { return !c.OK() }); i >= 0 {
		fmt.Fprintf(stderr, "loadtest: %s under %s: expected %q, observed %q%s\n", cells[i].Lock, cells[i].Scenario, cells[i].Expected, cells[i].Observed, evidence(cells[i]))
		return 1
	}
	return 0
}

// chosen are the scenarios -scenario names: one, or all.
func chosen(name string) []scenario.Scenario {
	return slices.DeleteFunc(slices.Clone(scenario.All), func(s scenario.Scenario) bool { return name != "all" && name != s.Name })
}

// onStack yields the scenarios -scenario names that run on this stack,
// passing over, and saying so, those that do not run on Compose when the
// run is on it.
func onStack(o options, stderr io.Writer) iter.Seq[scenario.Scenario] {
	return func(yield func(scenario.Scenario) bool) {
		for _, s := range chosen(o.scenario) {
			if ok, why := s.OnCompose(); o.compose != "" && !ok {
				fmt.Fprintf(stderr, "loadtest: scenario %s skipped on Compose: %s\n", s.Name, why)
				continue
			}
			if !yield(s) {
				return
			}
		}
	}
}

// appliesTo are those of locks s has an expected outcome for: its cells.
func appliesTo(s scenario.Scenario, locks []string) []string {
	return slices.DeleteFunc(slices.Clone(locks), func(l string) bool { _, ok := s.Expect[l]; return !ok })
}

// noCell says why the scenarios name chooses run no cell for locks (none
// of them applies to any of the versions), or "" when some cell runs: a
// selection that runs nothing must not exit 0 with a header for a table.
func noCell(name string, locks []string) string {
	var some []string // the versions it applies to, in the tutorial's order
	for _, s := range chosen(name) {
		if len(appliesTo(s, locks)) > 0 {
			return ""
		}
		for _, l := range appliesTo(s, versions.Names()) {
			if !slices.Contains(some, l) {
				some = append(some, l)
			}
		}
	}
	return "runs no cell: it applies only to " + strings.Join(slices.DeleteFunc(versions.Names(), func(l string) bool { return !slices.Contains(some, l) }), " ")
}

// scenarioEnv is the cluster the scenarios and the nemesis run against:
// the Compose project (-compose), or the local cluster of -run-dir; and what
// its replicas report on /healthz. With no admin token given, o takes the
// local cluster's.
func scenarioEnv(ctx context.Context, o *options) (env scenario.Env, h api.Health, err error) {
	if h, err = o.cfg.Health(ctx); err != nil {
		return env, h, fmt.Errorf("cannot read the replicas' settings: %w", err)
	}
	if o.compose != "" {
		env, err = scenario.Compose(ctx, stores.Open, o.compose, o.cfg.URL, h, o.cfg.AdminToken, o.redisPass)
	} else {
		var c *cluster.Cluster
		if c, err = cluster.Load(o.runDir); err != nil {
			return env, h, fmt.Errorf("the scenarios and the nemesis need the local cluster (make scenarios starts one): %w", err)
		}
		o.cfg.AdminToken = cmp.Or(o.cfg.AdminToken, c.State.AdminToken)
		env, err = stores.Local(c, h, o.cfg.AdminToken)
	}
	env.URL = o.cfg.URL
	return env, h, err
}

// evidence is what contradicts a cell's outcome in its history, if anything.
func evidence(c scenario.Cell) string {
	if c.Evidence == "" {
		return ""
	}
	return "; EVIDENCE: " + c.Evidence
}

// writeMatrix writes the observed matrix into file's generated section
// scenarios-observed (scenarios-observed-sentinel for make scenarios' second
// pass, on a cluster Sentinel watches): one row per version, one column per
// scenario that ran.
func writeMatrix(file string, cells []scenario.Cell, settings map[string]string, sentinel bool) error {
	var cols []int
	for i, s := range scenario.All {
		if slices.ContainsFunc(cells, func(c scenario.Cell) bool { return c.Scenario == s.Name }) {
			cols = append(cols, i)
		}
	}
	var b strings.Builder
	b.WriteString("| version |")
	for _, i := range cols {
		fmt.Fprintf(&b, " %s |", scenario.All[i].Name)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(cols)) + "\n")
	for _, row := range scenario.Matrix(cells, versions.Names()) {
		line := "| `" + row.Lock + "` |"
		for _, i := range cols {
			switch c := row.Cells[i]; {
			case c == nil:
				line += " - |"
			case c.OK():
				line += " " + c.Observed + " ✓ |"
			default:
				line += fmt.Sprintf(" %s ✗ (expected: %s) |", c.Observed, c.Expected)
			}
		}
		b.WriteString(line + "\n")
	}
	section, cluster := "scenarios-observed", ""
	if sentinel {
		section, cluster = "scenarios-observed-sentinel", " on the cluster Redis Sentinel watches (SENTINEL=1)"
	}
	fmt.Fprintf(&b, "\nObserved by `make scenarios-docs` on %s (%d cores)%s: replicas with -ttl %s, -acquire-timeout %s; ✓ = as expected.\n",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), cluster, settings["ttl"], settings["acquire_timeout"])
	return docgen.Replace(file, section, b.String())
}

// writeScenarioReport writes the matrix as the HTML report's scenarios section.
func writeScenarioReport(o options, cells []scenario.Cell, settings map[string]string) error {
	rep := loadtest.NewReport(o.cfg, nil, append(o.notes, fmt.Sprintf("Replicas with -ttl %s and -acquire-timeout %s, fault hooks on (-chaos).",
		settings["ttl"], settings["acquire_timeout"])))
	rep.Title = "locklab: each version's flaw, on demand"
	for _, s := range scenario.All {
		rep.Scenarios = append(rep.Scenarios, loadtest.ScenarioInfo{Name: s.Name, Injected: s.Injected})
	}
	for _, row := range scenario.Matrix(cells, versions.Names()) {
		mr := loadtest.MatrixRow{Lock: row.Lock}
		for _, c := range row.Cells {
			if c == nil {
				mr.Cells = append(mr.Cells, loadtest.MatrixCell{})
				continue
			}
			mr.Cells = append(mr.Cells, loadtest.MatrixCell{Applies: true, OK: c.OK(), Observed: c.Observed, Expected: c.Expected,
				Detail: c.Detail + evidence(*c), Lock: c.Lock, Scenario: c.Scenario, Verdict: loadtest.Verdict(c.Verdict, ""),
				Timeline: loadtest.Timeline(c.Sales, nil, c.Marks)})
		}
		rep.Matrix = append(rep.Matrix, mr)
		v, _ := versions.Lookup(row.Lock)
		rep.Versions = append(rep.Versions, v)
	}
	f, err := os.Create(o.out)
	if err != nil {
		return err
	}
	if err := loadtest.WriteHTML(f, rep); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// printRows prints rows one JSON object a line (asJSON), or as a table under
// header, each row's tab-separated line from line.
func printRows[T any](w io.Writer, asJSON bool, rows []T, header string, line func(T) string) {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, r := range rows {
			_ = enc.Encode(r) // plain data: it cannot fail
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, line(r))
	}
	tw.Flush()
}
