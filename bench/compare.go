package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/locklab/locklab/internal/versions"
)

// The goal of issue 33 against the libraries people use instead: our
// hand-off sells at least as fast as the fastest library, with at most half
// the lowest library p99, and leaves no waiter stuck.
const (
	libraryP99   = 0.5 // our hand-off's p99 over the lowest library p99
	ourVersion   = "v6"
	ourBest      = "handoff"
	compareTitle = "v6 handoff against the libraries"
)

// Comparison is the libraries' side-by-side: our v6 in each of its waits
// and every library version, through nginx, in interleaved rounds (round 1
// of each, then round 2 of each, ...), so that every side met the same
// machine as the others within seconds: absolute figures compare only so.
type Comparison struct {
	Rounds  int     `json:"rounds"`
	Seconds float64 `json:"seconds_per_round"`
	Sides   []Side  `json:"sides"`
	// Fastest and Steadiest are the library with the most sales/s and the
	// one with the lowest p99.
	Fastest   string `json:"fastest_library"`
	Steadiest string `json:"lowest_p99_library"`
}

// Side is one row of the comparison.
type Side struct {
	Lock    string `json:"lock"`
	Wait    string `json:"wait,omitempty"`
	Library string `json:"library,omitempty"` // the Go module; empty: ours
	// Sales, P50 and P99 are the medians of the rounds'; Max the highest.
	Sales float64   `json:"sales_per_sec"`
	P50   float64   `json:"p50_ms"`
	P99   float64   `json:"p99_ms"`
	Max   float64   `json:"max_ms"`
	Each  []float64 `json:"sales_per_sec_rounds"`
	// Failed counts requests not served (an acquisition that timed out is
	// a 503), by reason in FailedBy.
	Failed   int            `json:"failed"`
	FailedBy map[string]int `json:"failed_by,omitempty"`
	// TooLittle says which round tested too little (sold nothing, or
	// served under half its requests), "" when none did: such a side is
	// no baseline, and the comparison's targets fail on it (a library that
	// failed every request would otherwise let "at least as fast" pass).
	TooLittle string `json:"too_little,omitempty"`
	// Per sale, over every round: commands run in Redis (every node, from
	// INFO commandstats), and round trips the replicas' go-redis clients
	// made (rueidislock's own client is not counted: Trips says so).
	CommandsPerSale   float64 `json:"commands_per_sale"`
	RoundTripsPerSale float64 `json:"round_trips_per_sale"`
	Trips             bool    `json:"round_trips_counted"`
	// RoundTrip is a Redis round trip measured during the side's runs, µs
	// (Row.RoundTrip).
	RoundTrip float64 `json:"round_trip_us,omitempty"`
}

// countsTrips says whether the replicas' round-trip counter (a go-redis
// hook) sees every round trip of lock's sale: not rueidislock's, whose lock
// runs on rueidis's own client; their commands in Redis are counted all the same.
func countsTrips(lock string) bool {
	v, _ := versions.Lookup(lock)
	return !strings.HasPrefix(v.Library, "github.com/redis/rueidis/")
}

// Label is the side as the tables name it.
func (s Side) Label() string { return strings.TrimSpace(s.Lock + " " + s.Wait) }

// planComparison lays out the sides: v6 as it polls, is notified and is
// handed off, then every library version, each as it waits; a partial
// bench (-lock) compares only the versions it measures.
func (b *bench) planComparison() {
	if b.o.compareRounds < 1 {
		return
	}
	c := &Comparison{Rounds: b.o.compareRounds, Seconds: b.o.duration.Seconds()}
	for _, row := range b.rep.Rows {
		v, _ := versions.Lookup(row.Lock)
		if row.Lock == ourVersion || v.Library != "" {
			c.Sides = append(c.Sides, Side{Lock: row.Lock, Wait: row.Wait, Library: v.Library, FailedBy: map[string]int{}})
		}
	}
	if len(c.Sides) > 0 {
		b.rep.Compare = c
	}
}

// compare runs the comparison's rounds, interleaved.
func (b *bench) compare(ctx context.Context) error {
	c := b.rep.Compare
	if c == nil {
		return nil
	}
	totals := make([]counters, len(c.Sides))
	sold := make([]int, len(c.Sides))
	p50s, p99s, rtts := make([][]float64, len(c.Sides)), make([][]float64, len(c.Sides)), make([][]float64, len(c.Sides))
	for round := range c.Rounds {
		for i := range c.Sides {
			s := &c.Sides[i]
			row := Row{Lock: s.Lock, Wait: s.Wait}
			start, err := b.counts(ctx, row)
			if err != nil {
				return err
			}
			res, _, rtt, err := b.throughNginx(ctx, row)
			if err != nil {
				return fmt.Errorf("comparison: %w", err)
			}
			end, err := b.counts(ctx, row)
			if err != nil {
				return err
			}
			totals[i] = totals[i].plus(end.minus(start))
			sold[i] += res.Sold
			s.Each = append(s.Each, res.SalesPerSec)
			if rtt > 0 {
				rtts[i] = append(rtts[i], rtt)
			}
			p50s[i], p99s[i] = append(p50s[i], res.Latency.P50), append(p99s[i], res.Latency.P99)
			s.Max = max(s.Max, res.Latency.Max)
			s.Failed += res.NotServed()
			if res.TooLittle != "" && s.TooLittle == "" {
				s.TooLittle = fmt.Sprintf("round %d %s", round+1, res.TooLittle)
			}
			for k, n := range res.FailedBy {
				s.FailedBy[k] += n
			}
			b.say("comparison round %d, %s: %.0f sales/s, p99 %.1f ms, %d not served", round+1, s.Label(), res.SalesPerSec, res.Latency.P99, res.NotServed())
		}
	}
	for i := range c.Sides {
		s := &c.Sides[i]
		s.Sales, s.P50, s.P99 = median(slices.Clone(s.Each)), median(p50s[i]), median(p99s[i])
		if len(rtts[i]) > 0 {
			s.RoundTrip = median(rtts[i])
		}
		if sold[i] > 0 {
			s.CommandsPerSale = float64(totals[i].commands) / float64(sold[i])
			s.RoundTripsPerSale = totals[i].trips / float64(sold[i])
		}
		s.Trips = countsTrips(s.Lock)
	}
	return nil
}

// checkComparison adds the goal's three lines to the targets: they are
// what issue 33 holds our hand-off to, and a library that beats it is
// reported as a missed target, by name.
func (r *Report) checkComparison(add func(name, want, got string, met bool)) {
	c := r.Compare
	if c == nil {
		return
	}
	ours := c.ours()
	var fastest, steadiest *Side
	var untested []string
	for i := range c.Sides {
		s := &c.Sides[i]
		if s.TooLittle != "" {
			untested = append(untested, s.Label()+": "+s.TooLittle)
			continue
		}
		if s.Library != "" {
			if fastest == nil || s.Sales > fastest.Sales {
				fastest = s
			}
			if steadiest == nil || s.P99 < steadiest.P99 {
				steadiest = s
			}
		}
	}
	if len(untested) > 0 {
		add(compareTitle+": every side tested", "each side sold, and served at least half its requests, every round",
			strings.Join(untested, "; "), false)
	}
	if ours == nil || fastest == nil {
		return
	}
	c.Fastest, c.Steadiest = fastest.Label(), steadiest.Label()
	add(compareTitle+": sales/s", fmt.Sprintf(">= the fastest library's (%s, %.0f)", fastest.Label(), fastest.Sales),
		fmt.Sprintf("%.0f = %.2f x", ours.Sales, ours.Sales/fastest.Sales), ours.Sales >= fastest.Sales)
	add(compareTitle+": p99", fmt.Sprintf("<= %.1f x the lowest library p99 (%s, %.1f ms)", libraryP99, steadiest.Label(), steadiest.P99),
		fmt.Sprintf("%.1f ms = %.2f x", ours.P99, ours.P99/steadiest.P99), steadiest.P99 > 0 && ours.P99 <= libraryP99*steadiest.P99)
	add(compareTitle+": no waiter stuck", "every request served", fmt.Sprintf("%d not served", ours.Failed), ours.Failed == 0)
}

// comparisonMarkdown is the comparison's table for docs/performance.md,
// with the goal's lines and, plainly, where a library beat us.
func comparisonMarkdown(b *strings.Builder, r *Report) {
	c := r.Compare
	if c == nil {
		return
	}
	fmt.Fprintf(b, "\n### Against the libraries people use\n\nThe same stack, the same load (c=%d, stock that never runs out), %d interleaved rounds of %.0f s: round 1 of every side, then round 2 of every side, and so on; figures are the medians of the rounds (max: the highest).\n\n", r.Concurrency, c.Rounds, c.Seconds)
	b.WriteString("| `-lock` | `-wait` | library | sales/s | p50 ms | p99 ms | max ms | not served | commands in Redis / sale | round trips / sale | Redis round trip, µs |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range c.Sides {
		lib, trips := "ours", fmt.Sprintf("%.1f", s.RoundTripsPerSale)
		if s.Library != "" {
			lib = "`" + s.Library + "`"
		}
		if !s.Trips {
			trips = "not counted (its own client)"
		}
		lock := "`" + s.Lock + "`"
		if s.TooLittle != "" {
			lock += " (TESTED TOO LITTLE: " + s.TooLittle + ")"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %.0f | %.1f | %.1f | %.1f | %d | %.1f | %s | %s |\n", lock, dash(s.Wait), lib, s.Sales, s.P50, s.P99, s.Max, s.Failed, s.CommandsPerSale, trips, micros(s.RoundTrip))
	}
	b.WriteString("\n")
	for _, t := range r.Targets {
		if strings.HasPrefix(t.Name, compareTitle) {
			fmt.Fprintf(b, "- %s: %s, want %s %s\n", t.Name, t.Got, t.Want, tick(t.Met))
		}
	}
	if beat := c.beaten(); len(beat) > 0 {
		fmt.Fprintf(b, "\nWhere a library beat us in this run: %s.\n", strings.Join(beat, "; "))
	}
}

// ours is our hand-off's side (nil in a partial bench without it).
func (c *Comparison) ours() *Side {
	for i, s := range c.Sides {
		if s.Library == "" && s.Lock == ourVersion && s.Wait == ourBest {
			return &c.Sides[i]
		}
	}
	return nil
}

// beaten says, for every library side that sold faster or had a lower p99
// than our hand-off, by how much.
func (c *Comparison) beaten() []string {
	ours := c.ours()
	if ours == nil || ours.Sales == 0 {
		return nil
	}
	var out []string
	for _, s := range c.Sides {
		if s.Library == "" || s.TooLittle != "" { // no evidence either way: its own line says so
			continue
		}
		if s.Sales > ours.Sales {
			out = append(out, fmt.Sprintf("%s sold %.0f/s to our hand-off's %.0f (%.2f x)", s.Label(), s.Sales, ours.Sales, s.Sales/ours.Sales))
		}
		if s.P99 < ours.P99 {
			out = append(out, fmt.Sprintf("%s's p99 was %.1f ms to our hand-off's %.1f", s.Label(), s.P99, ours.P99))
		}
	}
	return out
}

// writeComparison prints the comparison's table, and where a library beat us.
func writeComparison(w io.Writer, r *Report) {
	c := r.Compare
	if c == nil {
		return
	}
	fmt.Fprintf(w, "against the libraries (%d interleaved rounds of %.0f s, c=%d):\n", c.Rounds, c.Seconds, r.Concurrency)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "lock\twait\tsales/s\tp50 ms\tp99 ms\tmax ms\tnot served\tcmds/sale\ttrips/sale\tRedis RTT us\tlibrary\t")
	for _, s := range c.Sides {
		lib, trips := "ours", fmt.Sprintf("%.1f", s.RoundTripsPerSale)
		if s.Library != "" {
			lib = s.Library
		}
		if !s.Trips {
			trips = "-"
		}
		lock := s.Lock
		if s.TooLittle != "" {
			lock += " (TESTED TOO LITTLE: " + s.TooLittle + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.1f\t%.1f\t%.1f\t%d\t%.1f\t%s\t%s\t%s\t\n", lock, dash(s.Wait), s.Sales, s.P50, s.P99, s.Max, s.Failed, s.CommandsPerSale, trips, micros(s.RoundTrip), lib)
	}
	tw.Flush()
	for _, line := range c.beaten() {
		fmt.Fprintln(w, "  a library beat us:", line)
	}
	fmt.Fprintln(w)
}
