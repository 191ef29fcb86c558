// Command loadtest compares the lock versions by what they do to the stock:
// for each version it resets the stock, fires concurrent sales through the
// cluster's nginx, reads the stock back, and reports the oversell.
//
//	go run ./loadtest -lock all -out report.html
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/locklab/locklab/internal/checker"
	"github.com/locklab/locklab/internal/cli"
	"github.com/locklab/locklab/internal/loadtest"
	"github.com/locklab/locklab/internal/scenario"
	"github.com/locklab/locklab/internal/versions"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

func main() { cli.Main(run) }

// The service's variables of the secrets, read here too: the admin token and
// the Redis password are better given through the environment than as flags.
const (
	tokenEnv    = "INVENTORY_ADMIN_TOKEN"
	passwordEnv = "INVENTORY_REDIS_PASSWORD"
)

type options struct {
	cfg          loadtest.Config
	locks        []string
	json         bool
	out          string
	expectSafe   bool
	notes        []string
	scenario     string // a scenario name, or all; empty: the load test
	lockList     string
	waits        []string // "": the replicas' own
	waitList     string
	doc          string
	mutate       bool // with -scenario: each held cell with its fix off
	runDir       string
	compose      string // with -scenario: the Compose project to run against
	redisPass    string
	nemesis      bool
	seed         uint64
	expectUnsafe bool
}

func parse(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	var o options
	fs := cli.FlagSet("loadtest", "Usage: go run ./loadtest [flags]\n   or: docker compose run --rm --no-deps loadtest [flags]   (the Compose stack's own: -url is http://nginx/sale there)\n\n"+
		"Compares lock versions by remaining stock through a running cluster (make up, or docker compose up).", stderr)
	fs.StringVar(&o.cfg.URL, "url", "http://localhost/sale", "the service's /sale endpoint (through nginx)")
	fs.IntVar(&o.cfg.Requests, "n", 1000, "requests per version")
	fs.IntVar(&o.cfg.Concurrency, "c", 100, "concurrent requests (with -rate: the most in flight)")
	fs.Float64Var(&o.cfg.Rate, "rate", 0, "requests per second on a fixed schedule (an open model: latency counted from each request's due time, so a stall is not hidden); 0: a closed loop of -c workers")
	fs.Int64Var(&o.cfg.Stock, "stock", 100, "stock set before each version (fewer units than requests, so every extra sale shows)")
	fs.StringVar(&o.lockList, "lock", "all", "versions to compare: one, a comma list, or all ("+strings.Join(versions.Names(), " ")+")")
	fs.StringVar(&o.waitList, "wait", "", "how v3-v8 wait, per request (?wait=): poll, notify, handoff, a comma list or all (each such version runs once per wait); empty: as the replicas' -wait says")
	fs.BoolVar(&o.json, "json", false, "print one JSON object per version instead of the table")
	fs.StringVar(&o.out, "out", "", "also write a self-contained HTML report to this file (-scenario on a cluster Redis Sentinel watches: NAME-sentinel.EXT beside it, make scenarios' second pass)")
	fs.StringVar(&o.cfg.AdminToken, "admin-token", "", "bearer token for PUT /stock, GET /history, the fault hooks, and ?lock= on a stack published beyond loopback, when the service requires one; "+
		"default: $"+tokenEnv+", or with -scenario or -nemesis on the local cluster, its own (in its state file). "+
		"Prefer those: a flag's value is on the command line, which every user of the machine can read")
	fs.BoolVar(&o.expectSafe, "expect-safe", false, "exit 1 when a version other than none and v2 oversold, or any version tested too little (sold nothing, or served under half its requests)")
	fs.BoolVar(&o.cfg.Plain, "plain", false, "just fire -n GET requests at -url (no stock, no ?lock=): to measure the load test itself")
	fs.StringVar(&o.scenario, "scenario", "", "run a fault scenario instead of the load test: "+scenarioNames()+", or all (needs replicas started with -chaos and -admin-token)")
	fs.StringVar(&o.runDir, "run-dir", ".run", "with -scenario or -nemesis: the local cluster's run directory (its state file: the Redis nodes to watch, the processes to freeze and kill)")
	fs.StringVar(&o.compose, "compose", "", "with -scenario or -nemesis: run against this Compose project (started with deploy/docker-compose.scenarios.yml) instead of the local cluster; the scenarios that need the local cluster's fault proxies, clock shim or restart arguments are skipped, each with its reason")
	fs.StringVar(&o.redisPass, "redis-password", "", "with -compose: the Redis nodes' password; default: $"+passwordEnv+", else the stack's own, read from its redis1 container (the Compose file's secrets volume). "+
		"Prefer the environment: a flag's value is on the command line, which every user of the machine can read")
	fs.BoolVar(&o.nemesis, "nemesis", false, "keep a steady load (-rate, default 30/s) on each version for -duration while a seeded schedule of faults (pause, kill, partition, delay, slow holder, clock jump) hits random targets of the local cluster (make scenarios' cluster: -chaos, -admin-token, FAULTS=1), and let the history checker decide")
	fs.DurationVar(&o.cfg.Duration, "duration", 0, "with -nemesis: how long the load runs (required)")
	fs.Uint64Var(&o.seed, "seed", 1, "with -nemesis: the schedule's seed (the same seed, lease and cluster: the same schedule)")
	fs.BoolVar(&o.cfg.Fence, "fence", false, "fencing on for every sale (the fence=1 hook; needs -admin-token and replicas with -chaos); only for versions that hand out tokens ("+strings.Join(versions.Fencing(), " ")+")")
	fs.BoolVar(&o.expectUnsafe, "expect-unsafe", false, "with -nemesis: exit 1 when it found no violation for a version")
	fs.BoolVar(&o.mutate, "mutate", false, "with -scenario: run each cell expected to hold with its fix switched off (fencing, the acknowledgement, the watchdog, the lock, ...); each must show its flaw, or the cell could not have failed (make mutations); with -doc the table goes to the section mutations-observed")
	fs.StringVar(&o.doc, "doc", "", "with -scenario: write the observed matrix into this Markdown file's generated section (scenarios-observed: docs/faults.md; scenarios-observed-sentinel on a cluster Redis Sentinel watches)")
	fs.Func("note", "a line about the setup, shown in the report (repeatable)", func(s string) error {
		o.notes = append(o.notes, s)
		return nil
	})
	err := cli.Parse(fs, args, 0)
	if err != nil {
		return o, err
	}
	if err := unused(fs, o); err != "" {
		return o, cli.UsageError(stderr, "loadtest", "%s", err)
	}
	o.cfg.AdminToken = cmp.Or(o.cfg.AdminToken, getenv(tokenEnv))
	o.redisPass = cmp.Or(o.redisPass, getenv(passwordEnv))
	if o.cfg.Requests < 1 || o.cfg.Concurrency < 1 || o.cfg.Stock < 0 || o.cfg.Rate < 0 {
		return o, cli.UsageError(stderr, "loadtest", "-n and -c must be >= 1, -stock and -rate >= 0")
	}
	if o.waits, err = parseWaits(o.waitList); err != nil {
		return o, cli.UsageError(stderr, "loadtest", "%s", err)
	}
	if o.cfg.Plain {
		o.locks = []string{""}
		return o, nil
	}
	if o.scenario != "" {
		if !slices.Contains(scenario.Names(), o.scenario) && o.scenario != "all" {
			return o, cli.UsageError(stderr, "loadtest", "-scenario %q: want %s or all", o.scenario, scenarioNames())
		}
	} else if o.compose != "" && !o.nemesis {
		return o, cli.UsageError(stderr, "loadtest", "-compose %q: only with -scenario or -nemesis", o.compose)
	}
	if o.nemesis && (o.cfg.Duration <= 0 || o.scenario != "") {
		return o, cli.UsageError(stderr, "loadtest", "-nemesis needs -duration (and no -scenario)")
	}
	if !o.nemesis && (o.cfg.Duration != 0 || o.expectUnsafe) {
		return o, cli.UsageError(stderr, "loadtest", "-duration and -expect-unsafe go with -nemesis")
	}
	if o.cfg.Fence && o.cfg.AdminToken == "" && (!o.nemesis || o.compose != "") { // the local cluster's nemesis: its own
		return o, cli.UsageError(stderr, "loadtest", "-fence needs the admin token (it is a fault hook): $%s or -admin-token", tokenEnv)
	}
	locks, err := parseLocks(o.lockList)
	if err != nil {
		return o, cli.UsageError(stderr, "loadtest", "%s", err)
	}
	o.locks = locks
	if o.cfg.Fence {
		if i := slices.IndexFunc(locks, func(l string) bool { v, _ := versions.Lookup(l); return !v.Fences() }); i >= 0 {
			return o, cli.UsageError(stderr, "loadtest", "-fence: %s hands out no fencing token (every sale would be refused, and the run test nothing); the versions that fence: %s",
				locks[i], strings.Join(versions.Fencing(), " "))
		}
	}
	if o.expectSafe && o.cfg.Stock == 0 {
		return o, cli.UsageError(stderr, "loadtest", "-stock 0 with -expect-safe: with nothing to sell, no lock can show it is safe")
	}
	if o.mutate && o.scenario != "" && !slices.ContainsFunc(chosen(o.scenario), func(s scenario.Scenario) bool {
		return len(scenario.Mutations(s, o.locks)) > 0
	}) {
		return o, cli.UsageError(stderr, "loadtest", "-mutate: -scenario %s with -lock %s has no cell expected to hold: no fix to switch off", o.scenario, o.lockList)
	}
	if o.mutate && o.out != "" {
		return o, cli.UsageError(stderr, "loadtest", "-out with -mutate: the mutations print a table (and with -doc write it), no report")
	}
	if o.scenario != "" {
		if why := noCell(o.scenario, o.locks); why != "" {
			return o, cli.UsageError(stderr, "loadtest", "-scenario %s with -lock %s %s", o.scenario, o.lockList, why)
		}
	}
	return o, nil
}

// modeFlags are the flags only some modes use (the others are everyone's).
// Given to a mode that does not list it, such a flag would be ignored: a
// run that ignored -fence or -wait reads as if it had tested them.
var modeFlags = map[string][]string{
	"load test":  {"n", "c", "rate", "stock", "lock", "wait", "fence", "expect-safe"},
	"-plain run": {"n", "c", "rate"},
	"scenarios":  {"lock", "doc", "mutate"},
	"nemesis":    {"duration", "seed", "expect-unsafe"},
}

// unused says which flags given the mode of o does not use, if any. The
// nemesis's are left to it (loadtest/nemesis.go).
func unused(fs *flag.FlagSet, o options) string {
	mode := "load test"
	switch {
	case o.nemesis:
		return ""
	case o.scenario != "":
		mode = "scenarios"
	case o.cfg.Plain:
		mode = "-plain run"
	}
	var bad []string
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(modeFlags[mode], f.Name) {
			return
		}
		for _, names := range modeFlags {
			if slices.Contains(names, f.Name) {
				bad = append(bad, "-"+f.Name)
				return
			}
		}
	})
	if len(bad) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: not used by the %s: it would be ignored", strings.Join(bad, " "), mode)
}

// parseWaits turns "", "all", "notify" or "poll,handoff" into the waits to
// run, in the order of versions.Waits; "" is the replicas' own.
func parseWaits(s string) ([]string, error) {
	if s == "" {
		return []string{""}, nil
	}
	if s == "all" {
		return versions.Waits, nil
	}
	var waits []string
	for w := range strings.SplitSeq(s, ",") {
		if w = strings.TrimSpace(w); !slices.Contains(versions.Waits, w) {
			return nil, fmt.Errorf("-wait %q: want all, or some of %s", w, strings.Join(versions.Waits, " "))
		}
		waits = append(waits, w)
	}
	return slices.DeleteFunc(slices.Clone(versions.Waits), func(w string) bool {
		return !slices.Contains(waits, w)
	}), nil
}

// oneRun is one load test: a version, waiting as cfg.Wait says.
type oneRun struct {
	lock string
	cfg  loadtest.Config
}

// runs are the load test's runs: each version, and each one that waits as
// -wait says once per wait.
func (o options) runs() []oneRun {
	var runs []oneRun
	for _, lock := range o.locks {
		v, _ := versions.Lookup(lock)
		for i, wait := range o.waits {
			if !v.Wait && i > 0 {
				break
			}
			cfg := o.cfg
			if cfg.Wait = wait; !v.Wait {
				cfg.Wait = ""
			}
			runs = append(runs, oneRun{lock, cfg})
		}
	}
	return runs
}

// parseLocks turns "all", "v6" or "v8,v1" into versions in tutorial order.
func parseLocks(s string) ([]string, error) {
	if s == "all" {
		return versions.Names(), nil
	}
	want := map[string]bool{}
	for name := range strings.SplitSeq(s, ",") {
		name = strings.TrimSpace(name)
		if _, ok := versions.Lookup(name); !ok {
			return nil, fmt.Errorf("-lock: unknown version %q: want all, or some of %s", name, strings.Join(versions.Names(), " "))
		}
		want[name] = true
	}
	var locks []string
	for _, name := range versions.Names() {
		if want[name] {
			locks = append(locks, name)
		}
	}
	return locks, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	o, err := parse(args, getenv, stderr)
	if err != nil {
		return cli.Status(err)
	}
	if o.mutate {
		return runMutations(ctx, o, stdout, stderr)
	}
	if o.scenario != "" {
		return runScenarios(ctx, o, stdout, stderr)
	}
	if o.nemesis {
		return runNemesis(ctx, o, stdout, stderr)
	}
	if svc, err := o.cfg.Service(); err == nil { // one client for every version's run; else Run says what is wrong with -url
		o.cfg.Client = svc
	}
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		bar := progressbar.NewOptions(o.cfg.Requests*len(o.runs()), progressbar.OptionSetWriter(stderr),
			progressbar.OptionShowCount(), progressbar.OptionClearOnFinish(), progressbar.OptionSetWidth(30))
		o.cfg.Progress = func(checker.Op) { _ = bar.Add(1) }
		defer bar.Finish()
	}

	if !o.cfg.Plain {
		// Say in the report what the replicas ran with, as they report it.
		if h, err := o.cfg.Health(ctx); err == nil && len(h.Settings) > 0 {
			s := h.Settings
			// A stack with no database or no ZooKeeper (the Compose stack, so
			// far) has no row of theirs: asked for by name, that is an error;
			// in all, they are left out, saying so.
			if why, missing := versions.Missing(o.locks, s); why != "" {
				if o.lockList != "all" {
					fmt.Fprintln(stderr, "loadtest: -lock "+why)
					return 1
				}
				o.locks = slices.DeleteFunc(o.locks, func(l string) bool { return slices.Contains(missing, l) })
				fmt.Fprintln(stderr, "loadtest: left out "+why)
			}
			o.notes = append(o.notes, fmt.Sprintf("Replica settings, as %s reports them on /healthz: -ttl %s, -retry %s (jittered), "+
				"-redlock-retry %s, -wait %s, -work %s (business time between reading and writing the stock), -acquire-timeout %s.",
				h.Replica, s["ttl"], s["retry"], s["redlock_retry"], cmp.Or(strings.Join(slices.DeleteFunc(slices.Clone(o.waits), func(w string) bool { return w == "" }), ", "), s["wait"]), s["work"], s["acquire_timeout"]))
		}
	}

	var results []loadtest.Result
	for _, r := range o.runs() {
		res, err := loadtest.Run(ctx, r.cfg, r.lock)
		if err != nil {
			fmt.Fprintf(stderr, "loadtest: %s: %v\n", strings.TrimSpace(lockName(r.lock)+" "+r.cfg.Wait), err)
			return 1
		}
		results = append(results, res)
	}

	if o.json {
		enc := json.NewEncoder(stdout)
		for _, r := range results {
			if err := enc.Encode(r); err != nil {
				return 1
			}
		}
	} else if err := loadtest.WriteTable(stdout, results); err != nil {
		return 1
	}
	if o.out != "" {
		if err := writeReport(o, results); err != nil {
			fmt.Fprintln(stderr, "loadtest:", err)
			return 1
		}
		fmt.Fprintln(stderr, "loadtest: report written to", o.out)
	}
	if o.expectSafe {
		if unsafe := notShownSafe(results); len(unsafe) > 0 {
			fmt.Fprintf(stderr, "loadtest: -expect-safe: %s\n", strings.Join(unsafe, "; "))
			return 1
		}
	}
	return 0
}

func lockName(lock string) string {
	if lock == "" {
		return "plain"
	}
	return lock
}

// notShownSafe lists the runs that do not show what -expect-safe expects:
// a version expected to be safe that oversold anyway, and any run that
// tested too little to show anything (it sold nothing, or served under
// half its requests: Result.TooLittle).
func notShownSafe(results []loadtest.Result) []string {
	var bad []string
	for _, r := range results {
		if v, _ := versions.Lookup(r.Lock); v.Safe && r.Oversold > 0 {
			bad = append(bad, fmt.Sprintf("%s oversold %d", r.Label(), r.Oversold))
		}
		if r.TooLittle != "" {
			bad = append(bad, fmt.Sprintf("%s tested too little: %s", r.Label(), r.TooLittle))
		}
	}
	return slices.Clip(bad)
}

func writeReport(o options, results []loadtest.Result) error {
	f, err := os.Create(o.out)
	if err != nil {
		return err
	}
	if err := loadtest.WriteHTML(f, loadtest.NewReport(o.cfg, results, o.notes)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
