// Command bench measures every lock version against what the machine can do,
// in one run on the local cluster (make bench):
//
//  1. the serialised ceiling: SET NX PX, GET, SET, Lua release, back to back
//     from one goroutine, with no HTTP;
//  2. each version's own ceiling: its acquire, the sale and its release,
//     serially from one goroutine against the same Redis (v7 and v8 take the
//     lock twice, redlock fans out to three nodes, notify and handoff queue);
//  3. the nginx ceiling: GET /healthz through nginx;
//  4. each version through nginx and both replicas, -c concurrent sales, with
//     stock that never runs out; v3 to v8 polling, notified and handed off
//     (a version's waits one after the other), each in rounds between sets
//     of its ceilings;
//  5. the comparison with the libraries people use: v6 in its three waits
//     beside every library version, in interleaved rounds (issue 33);
//  6. the default load test (n=1000, c=100) for each version: none may fail;
//
// then checks the targets and floors (issue 14), prints the table, writes it as JSON, and
// exits 1 if a target was missed. Ratios are taken within the run, and each
// row's ceilings are measured just before and just after its own run through
// nginx (the nginx ceiling around atomic's): the machine is shared and noisy,
// so a ratio compares figures from the same minute, and figures from two runs
// are compared as ratios.
//
// go run ./bench scale draws the scaling curve instead (scale.go).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/cli"
	"github.com/locklab/locklab/internal/docgen"
	"github.com/locklab/locklab/internal/versions"
)

func main() { cli.Main(run) }

type options struct {
	url         string
	runDir      string
	duration    time.Duration
	ceilingTime time.Duration
	concurrency int
	rounds      int
	jsonOut     string
	doc         string
	// loadTime is how long each offered load of the latency curve runs (0:
	// no curve); chart and report are where the curve and the table go.
	loadTime time.Duration
	chart    string
	report   string
	// locks are the versions measured (nil: every one); a partial run checks
	// only its own rows' goals.
	locks []string
	// compareRounds are the interleaved rounds of the libraries'
	// comparison (0: none).
	compareRounds int
}

func parse(args []string, stderr io.Writer) (o options, err error) {
	fs := cli.FlagSet("bench", "Usage: go run ./bench [flags]\n\nMeasures every version against the machine's ceilings on a running local cluster started with -work 0 (make bench does it all).", stderr)
	fs.StringVar(&o.url, "url", "http://localhost/sale", "the cluster's /sale endpoint, through nginx")
	fs.StringVar(&o.runDir, "run-dir", ".run", "the local cluster's run directory: its state file names the Redis nodes (the serial ceilings use keys bench:* there) and the replicas (their memory and /metrics)")
	fs.DurationVar(&o.duration, "duration", 3*time.Second, "how long each round of a version runs through nginx")
	fs.DurationVar(&o.ceilingTime, "ceiling-duration", 1600*time.Millisecond, "per row, how long its own ceiling and the serial ceiling each run in all: half in slices just before its run through nginx, half just after")
	fs.IntVar(&o.concurrency, "c", 64, "concurrent requests through nginx")
	fs.IntVar(&o.rounds, "rounds", 3, "runs through nginx per row, each between two sets of ceiling slices; a ratio is the median of the rounds'")
	fs.StringVar(&o.jsonOut, "json", "bench.json", "write the results here as JSON (empty: do not)")
	fs.StringVar(&o.doc, "doc", "", "also write the table into this Markdown file's generated section (bench: docs/performance.md)")
	fs.DurationVar(&o.loadTime, "load-duration", 1500*time.Millisecond, "per row, how long each offered load of its latency curve runs (an open model at 1/4, 1/2, 3/4 and 1 x the row's closed-loop sales/s); 0: no curve")
	fs.StringVar(&o.chart, "chart", "", "write the latency-vs-offered-load chart here, as SVG (empty: do not)")
	fs.StringVar(&o.report, "report", "", "write an HTML report here: the table and the latency-vs-offered-load chart (empty: do not)")
	fs.IntVar(&o.compareRounds, "compare-rounds", 3, "interleaved rounds of the comparison with the libraries people use (v6 polled, notified and handed off beside every library version, each -duration a round); 0: none")
	fs.Func("lock", "measure only these versions, comma-separated (default: every one); for a quick look at one row, not the docs' table", func(v string) error {
		for name := range strings.SplitSeq(v, ",") {
			if _, ok := versions.Lookup(strings.TrimSpace(name)); !ok {
				return fmt.Errorf("unknown version %q: want some of %s", name, strings.Join(versions.Names(), " "))
			}
			o.locks = append(o.locks, strings.TrimSpace(name))
		}
		return nil
	})
	if err := cli.Parse(fs, args, 0); err != nil {
		return o, err
	}
	if o.duration <= 0 || o.ceilingTime <= 0 || o.concurrency < 1 || o.rounds < 1 || o.loadTime < 0 || o.compareRounds < 0 {
		return o, cli.UsageError(stderr, "bench", "-duration and -ceiling-duration must be > 0, -c and -rounds >= 1, -load-duration and -compare-rounds >= 0")
	}
	return o, nil
}

func run(ctx context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "scale" {
		return runScale(ctx, args[1:], stdout, stderr)
	}
	o, err := parse(args, stderr)
	if err != nil {
		return cli.Status(err)
	}
	rep, err := measure(ctx, o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	rep.check()
	writeTable(stdout, rep)
	if o.jsonOut != "" {
		raw, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(o.jsonOut, append(raw, '\n'), 0o644); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		fmt.Fprintln(stderr, "bench: results written to", o.jsonOut)
	}
	if err := writeCharts(o, rep); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	if o.doc != "" {
		if err := docgen.Replace(o.doc, "bench", markdown(rep)); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		fmt.Fprintln(stderr, "bench: table written to", o.doc)
	}
	if missed := rep.missed(); len(missed) > 0 {
		fmt.Fprintf(stderr, "bench: %d target(s) missed:\n  %s\n", len(missed), strings.Join(missed, "\n  "))
		return 1
	}
	fmt.Fprintln(stderr, "bench: every target met")
	return 0
}
