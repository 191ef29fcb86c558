package loadtest

import (
	"embed"
	"fmt"
	"html/template"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/locklab/locklab/internal/checker"
	"github.com/locklab/locklab/internal/versions"
)

// WriteTable writes one row per result, in the order given.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "lock\trequests\tsold\tsold out\tfenced\tfailed\tunknown\tnot served\tstock before\tafter\toversold\ttwo holders\tlost updates\tlinearizable\tsales/s\tp50 ms\tp99 ms\tmax ms\treplicas\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%.0f\t%.1f\t%.1f\t%.1f\t%s\t\n",
			marked(r), r.Requests, r.Sold, r.SoldOut, r.Fenced, failures(r), r.Unknown, r.NotServed(), r.StockBefore, r.StockAfter, oversold(r),
			holders(r), evidence(r, r.LostUpdates), r.Linearizability, r.SalesPerSec, r.Latency.P50, r.Latency.P99, r.Latency.Max, replicas(r))
	}
	return tw.Flush()
}

// marked is the row's label, with why it tested too little, if it did:
// "atomic (TESTED TOO LITTLE: sold nothing)".
func marked(r Result) string {
	if r.TooLittle == "" {
		return r.Label()
	}
	return r.Label() + " (TESTED TOO LITTLE: " + r.TooLittle + ")"
}

// oversold is the oversell, or its range when outcomes are unknown.
func oversold(r Result) string {
	if r.OversoldMax > r.OversoldMin {
		return fmt.Sprintf("%d-%d", r.OversoldMin, r.OversoldMax)
	}
	return strconv.FormatInt(r.Oversold, 10)
}

// evidence is a count from the replicas' history, or "-" when it was not read.
func evidence(r Result, n int) string {
	if !r.HistoryChecked {
		return "-"
	}
	return strconv.Itoa(n)
}

// holders is the two-holders count, or "-" when no sale held a lock (the
// version has none) or the history was not read.
func holders(r Result) string {
	if r.Holds == 0 {
		return "-"
	}
	return evidence(r, r.TwoHolders)
}

// failures is "0", or the count with its breakdown by FailedBy's keys:
// "12 (503 lock_timeout:10, transport:2)".
func failures(r Result) string {
	if r.Failed == 0 {
		return "0"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(r.FailedBy)) {
		parts = append(parts, fmt.Sprintf("%s:%d", k, r.FailedBy[k]))
	}
	return fmt.Sprintf("%d (%s)", r.Failed, strings.Join(parts, ", "))
}

// replicas is "inventory-1:500 inventory-2:500".
func replicas(r Result) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(r.Replicas)) {
		parts = append(parts, fmt.Sprintf("%s:%d", k, r.Replicas[k]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

//go:embed report.html.tmpl
var reportFS embed.FS

var reportTmpl = template.Must(template.New("report.html.tmpl").Funcs(template.FuncMap{
	"failures": failures,
	"marked":   marked,
	"replicas": replicas,
	"oversold": oversold,
	"evidence": evidence,
	"holders":  holders,
	"f0":       func(v float64) string { return fmt.Sprintf("%.0f", v) },
	"f1":       func(v float64) string { return fmt.Sprintf("%.1f", v) },
}).ParseFS(reportFS, "report.html.tmpl"))

// Report is what the HTML report shows.
type Report struct {
	Title     string
	Generated time.Time
	Config    Config
	Rows      []ReportRow
	// Notes are lines about how the run was set up (a -work, the cluster).
	Notes []string
	// Scenarios and Matrix, when set, are the fault scenarios' results:
	// versions by scenarios, expected against observed.
	Scenarios []ScenarioInfo
	Matrix    []MatrixRow
	// Versions are described at the end: what each adds and still gets wrong.
	Versions []versions.Version
}

// ScenarioInfo names a scenario and what it injects.
type ScenarioInfo struct{ Name, Injected string }

// MatrixRow is one version's scenario cells.
type MatrixRow struct {
	Lock  string
	Cells []MatrixCell
}

// MatrixCell is one scenario run against one version; Applies is false where
// the scenario is not about that version.
type MatrixCell struct {
	Applies, OK                bool
	Observed, Expected, Detail string
	// Lock and Scenario name the cell; Verdict and Timeline show its
	// history.
	Lock, Scenario string
	Verdict        string
	Timeline       template.HTML
}

// ReportRow is one version: its result and what the catalogue says of it.
type ReportRow struct {
	Result
	Version     versions.Version
	MaxOversold float64
	MaxSales    float64
}

// Timeline draws the row's sales (see Timeline).
func (r ReportRow) Timeline() template.HTML { return Timeline(r.Sales, r.Ops, r.Marks) }

// Verdict says in one line what the checker found.
func (r ReportRow) Verdict() string { return Verdict(r.Result.Verdict, r.HistoryNote) }

// Verdict says in one line what the checker found in v (note: why the
// history was not read, if it was not).
func Verdict(v checker.Verdict, note string) string {
	var parts []string
	if v.HistoryChecked {
		parts = append(parts, fmt.Sprintf("two holders: %d", v.TwoHolders), fmt.Sprintf("lost updates: %d", v.LostUpdates))
	}
	if v.Linearizability != "" {
		parts = append(parts, "linearizable: "+v.Linearizability)
	}
	for _, why := range []string{v.NotLinearizable, v.Untested} {
		if why != "" {
			parts = append(parts, why)
		}
	}
	if note != "" {
		parts = append(parts, note)
	}
	s := strings.Join(parts, " · ")
	if v.Unknown > 0 {
		s += fmt.Sprintf(" · unknown outcomes: %d, oversold between %d and %d", v.Unknown, v.OversoldMin, v.OversoldMax)
	}
	return s
}

// OversoldPct is the oversold bar's length, in percent of the largest.
func (r ReportRow) OversoldPct() float64 { return pct(float64(r.Oversold), r.MaxOversold) }

// SalesPct is the sales/s bar's length, in percent of the largest.
func (r ReportRow) SalesPct() float64 { return pct(r.SalesPerSec, r.MaxSales) }

func pct(v, top float64) float64 {
	if top <= 0 || v <= 0 {
		return 0
	}
	return 100 * v / top
}

// NewReport pairs results with the catalogue and scales the charts.
func NewReport(cfg Config, results []Result, notes []string) Report {
	rep := Report{Title: "locklab: lock versions compared", Generated: time.Now(), Config: cfg, Notes: notes}
	var maxOver, maxSales float64
	for _, r := range results {
		maxOver = max(maxOver, float64(r.Oversold))
		maxSales = max(maxSales, r.SalesPerSec)
	}
	for _, r := range results {
		v, _ := versions.Lookup(r.Lock)
		rep.Rows = append(rep.Rows, ReportRow{Result: r, Version: v, MaxOversold: maxOver, MaxSales: maxSales})
		if !slices.ContainsFunc(rep.Versions, func(seen versions.Version) bool { return seen.Name == v.Name }) {
			rep.Versions = append(rep.Versions, v)
		}
	}
	return rep
}

// WriteHTML writes the report as one self-contained HTML file: no external
// scripts, fonts or styles; the charts are inline SVG.
func WriteHTML(w io.Writer, rep Report) error {
	return reportTmpl.Execute(w, rep)
}
