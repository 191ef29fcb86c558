package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// The targets (issue 14), as ratios within one run, and the regression
// floors of the rows that carry no target: polling is the lesson of what
// polling costs, and notify and redlock are reported beside it.
//
// Issue 14 asked for hand-off rows at 0.8 x their own ceiling through nginx.
// On this machine class that is out of reach whatever the wait does: even
// with no hand-over at all a row could reach only 1/(its hold through nginx)
// sales/s, and the hold itself doubles through nginx (the sale's three round
// trips wait for CPU behind nginx, the load generator and the other replica:
// 2 cores), which caps the ratio at 0.6-0.7 (Row.Bound, printed per row).
// What the wait does control is the hand-over, and so the share of the time
// the lock is held (Row.Busy): that is what the hand-off is held to, at what
// a hand-over of one Redis round trip allows (busyBound: hold over hold plus
// the round trip measured in the same runs; issue 48, where it was 0.8); its
// ratio to its own ceiling is reported, with a floor.
const (
	handoffP99   = 1.0 / 5 // hand-off's p99 over poll's, same version
	handoffTrips = 5.0     // round trips to Redis per sale, handed off (v7, v8: + nestedTrips): the waiter's claim of its grant rides with the sale's read, so a dead waiter cannot hold the queue up and costs no round trip

	nestedTrips  = 2.0  // v7 and v8 take the lock twice per sale: one more acquire and release
	setupTrips   = 0.01 // the load test's own round trips per run (PUT /stock, reading it back) fall in the count
	atomicTarget = 0.6  // atomic through nginx, over the nginx ceiling
	maxRSSMB     = 50.0 // each replica's peak resident memory

	pollFloor    = 0.15 // v3-v8 polling, over their own ceiling
	notifyFloor  = 0.3  // v3-v8 notified
	handoffFloor = 0.4  // v3-v8 handed off
	redlockFloor = 0.25 // redlock, which polls its three nodes
	etcdFloor    = 0.3  // etcd, which waits on a watch and writes through Raft
	zkFloor      = 0.3  // zk, which waits on a watch and writes through ZAB
	dbFloor      = 0.15 // db, which polls a row of its database, as v3-v8 poll Redis
)

// goal is what a row's ratio is held to: a target, or a regression floor.
func goal(row Row) (min float64, floor bool) {
	switch {
	case row.Lock == "atomic":
		return atomicTarget, false
	case row.Lock == "redlock":
		return redlockFloor, true
	case row.Lock == "etcd":
		return etcdFloor, true
	case row.Lock == "zk":
		return zkFloor, true
	case row.Lock == "db":
		return dbFloor, true
	case row.Wait == "handoff":
		return handoffFloor, true
	case row.Wait == "notify":
		return notifyFloor, true
	}
	return pollFloor, true
}

// want says a row's goal in words.
func want(row Row) string {
	min, floor := goal(row)
	if floor {
		return fmt.Sprintf("floor %.2f x %s ceiling", min, row.RatioOf)
	}
	return fmt.Sprintf(">= %.1f x %s ceiling", min, row.RatioOf)
}

// busyBound is the share of the time a hand-off row's lock must be held
// (issue 48): what a hand-over of one Redis round trip allows, hold over
// hold plus that round trip, both measured through nginx in the row's own
// runs; 0 when either is missing.
func busyBound(row Row) float64 {
	if row.HoldNginx <= 0 || row.RoundTrip <= 0 {
		return 0
	}
	return row.HoldNginx / (row.HoldNginx + row.RoundTrip)
}

// tripsLimit is a handed-off row's most round trips per sale.
func tripsLimit(row Row) float64 {
	switch row.Lock {
	case "v7", "v8":
		return handoffTrips + nestedTrips
	case "v5":
		return handoffTrips + 1 // its release GETs the owner first
	}
	return handoffTrips
}

// check evaluates every target and floor against the run.
func (r *Report) check() {
	r.Targets = nil
	add := func(name, want, got string, met bool) {
		r.Targets = append(r.Targets, Target{Name: name, Want: want, Got: got, Met: met})
	}
	poll := map[string]Row{}
	for _, row := range r.Rows {
		if row.Wait == "poll" || row.Wait == "" {
			poll[row.Lock] = row
		}
	}
	for _, row := range r.Rows {
		label := strings.TrimSpace(row.Lock + " " + row.Wait)
		min, _ := goal(row)
		add(label+" through nginx", want(row), fmt.Sprintf("%.2f", row.Ratio), row.Ratio >= min)
		if row.Wait == "handoff" {
			bound := busyBound(row)
			add(label+" lock busy", fmt.Sprintf(">= %.2f of the time, what a hand-over of one round trip allows (held %.0f µs, round trip %.0f µs)", bound, row.HoldNginx, row.RoundTrip),
				fmt.Sprintf("%.2f (hand-over %.0f µs = %.2f round trips; ratio bound %.2f)", row.Busy, row.Handover, row.Handover/row.RoundTrip, row.Bound), bound > 0 && row.Busy >= bound)
			p := poll[row.Lock]
			ratio := row.P99 / p.P99
			add(label+" p99", fmt.Sprintf("<= 1/5 x poll's (%.1f ms)", p.P99), fmt.Sprintf("%.1f ms = %.2f x", row.P99, ratio), p.P99 > 0 && ratio <= handoffP99)
			add(label+" round trips", fmt.Sprintf("<= %.0f per sale", tripsLimit(row)), fmt.Sprintf("%.1f", row.RoundTripsPerSale),
				row.RoundTripsPerSale > 0 && row.RoundTripsPerSale <= tripsLimit(row)+setupTrips)
		}
		if row.Failed > 0 {
			add(label+" through nginx", "no failed request", fmt.Sprintf("%d failed", row.Failed), false)
		}
	}
	r.checkComparison(add)
	r.checkGate(add)
	for _, d := range r.Default {
		label := strings.TrimSpace(d.Lock + " " + d.Wait)
		add(label+" default load test", "no failed request", fmt.Sprintf("%d failed", d.Failed), d.Failed == 0)
	}
	names := make([]string, 0, len(r.MemoryMB))
	for name := range r.MemoryMB {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		mb := r.MemoryMB[name]
		add(name+" peak RSS", fmt.Sprintf("< %.0f MB", maxRSSMB), fmt.Sprintf("%.1f MB", mb), mb < maxRSSMB)
	}
}

// missed lists the targets not met.
func (r *Report) missed() []string {
	var out []string
	for _, t := range r.Targets {
		if !t.Met {
			out = append(out, fmt.Sprintf("%s: want %s, got %s", t.Name, t.Want, t.Got))
		}
	}
	return out
}

func writeTable(w io.Writer, r *Report) {
	fmt.Fprintf(w, "%s, %s\n", r.Machine, r.Date)
	fmt.Fprintf(w, "serial ceiling (SET NX PX, GET, SET, Lua release; one goroutine): %.0f sales/s\n", r.Serial)
	fmt.Fprintf(w, "nginx ceiling (GET /healthz, c=%d): %.0f requests/s\n\n", r.Concurrency, r.Nginx)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "lock\twait\town ceiling/s\tx serial\tnginx sales/s\tp50 ms\tp99 ms\tratio (rounds)\tof\theld us: own\tnginx\thand-over us\tRedis RTT us\tbusy\ttrips/sale\tcmds/sale\tattempts/sale\t")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.2f\t%.0f\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%s\t\n", row.Lock, dash(row.Wait), row.Own, row.OwnVsSerial,
			row.Sales, row.P50, row.P99, spread(row), row.RatioOf, micros(row.HoldOwn), micros(row.HoldNginx), micros(row.Handover), micros(row.RoundTrip), busy(row.Busy),
			trips(row), row.CommandsPerSale, attempts(row.AttemptsPerSale))
	}
	tw.Flush()
	fmt.Fprintln(w)
	writeGate(w, r)
	writeComparison(w, r)
	met := 0
	for _, t := range r.Targets {
		if t.Met {
			met++
		}
	}
	fmt.Fprintf(w, "targets: %d of %d met\n", met, len(r.Targets))
	for _, t := range r.Targets {
		if !t.Met {
			fmt.Fprintf(w, "  MISSED %s: want %s, got %s\n", t.Name, t.Want, t.Got)
		}
	}
}

// trips prints a row's round trips per sale, "-" where the replicas'
// counter does not see the lock's own client.
func trips(row Row) string {
	if !countsTrips(row.Lock) {
		return "-"
	}
	return fmt.Sprintf("%.1f", row.RoundTripsPerSale)
}

// spread is a row's ratio, the median of its rounds, with their range.
func spread(row Row) string {
	if len(row.Rounds) < 2 {
		return fmt.Sprintf("%.2f", row.Ratio)
	}
	return fmt.Sprintf("%.2f (%.2f-%.2f)", row.Ratio, row.RatioMin, row.RatioMax)
}

// attempts prints lock attempts per sale, "-" for a version with no lock.
func attempts(n float64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", n)
}

// busy prints the share of the time the lock was held, "-" with no lock.
func busy(share float64) string {
	if share == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", share)
}

// micros prints a mean hold, "-" for a version that holds no lock.
func micros(us float64) string {
	if us == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", us)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// markdown is docs/performance.md's bench section.
func markdown(r *Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured by `make bench-docs` on %s, %s. One run; every ratio is within it: each row ran through nginx in rounds, each round between two sets of its ceilings, and its ratio is the median of the rounds' (their range in brackets).\n\n", r.Date[:10], r.Machine)
	fmt.Fprintf(&b, "- serial ceiling (SET NX PX, GET, SET, Lua release from one goroutine; median over every row's slices): **%.0f sales/s**\n", r.Serial)
	fmt.Fprintf(&b, "- nginx ceiling (GET /healthz through nginx, c=%d, before and after atomic's run): **%.0f requests/s**\n\n", r.Concurrency, r.Nginx)
	fmt.Fprintf(&b, "| `-lock` | `-wait` | own ceiling /s | own / serial | through nginx, sales/s | p50 ms | p99 ms | lock held, µs: own / nginx | hand-over, µs | Redis round trip, µs | lock busy | round trips to Redis / sale | commands run in Redis / sale | lock attempts / sale | ratio: median (rounds) | target or floor |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, row := range r.Rows {
		held := "-"
		if row.HoldOwn > 0 {
			held = micros(row.HoldOwn) + " / " + micros(row.HoldNginx)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %.0f | %.2f | %.0f | %.1f | %.1f | %s | %s | %s | %s | %s | %.1f | %s | %s | %s %s |\n", row.Lock, dash(row.Wait), row.Own,
			row.OwnVsSerial, row.Sales, row.P50, row.P99, held, micros(row.Handover), micros(row.RoundTrip), busy(row.Busy), trips(row), row.CommandsPerSale, attempts(row.AttemptsPerSale),
			spread(row), want(row), mark(r, strings.TrimSpace(row.Lock+" "+row.Wait)+" through nginx"))
	}
	b.WriteString("\n")
	for _, t := range r.Targets {
		if strings.HasPrefix(t.Name, compareTitle) { // comparisonMarkdown says them under its table
			continue
		}
		if strings.HasSuffix(t.Name, " p99") || strings.HasSuffix(t.Name, " round trips") || strings.HasSuffix(t.Name, " lock busy") {
			fmt.Fprintf(&b, "- %s: %s, want %s %s\n", t.Name, t.Got, t.Want, tick(t.Met))
		}
	}
	gateMarkdown(&b, r)
	failed := 0
	for _, d := range r.Default {
		failed += d.Failed
	}
	fmt.Fprintf(&b, "- default load test (n=1000, c=100, stock 100), %d runs (every version; v3-v8 also notified and handed off): %d failed requests\n", len(r.Default), failed)
	var mem []string
	for _, t := range r.Targets {
		if strings.HasSuffix(t.Name, " peak RSS") {
			mem = append(mem, fmt.Sprintf("%s %s", strings.TrimSuffix(t.Name, " peak RSS"), t.Got))
		}
	}
	fmt.Fprintf(&b, "- replicas' peak RSS over the whole bench: %s (want < %.0f MB)\n", strings.Join(mem, ", "), maxRSSMB)
	met := 0
	for _, t := range r.Targets {
		if t.Met {
			met++
		}
	}
	comparisonMarkdown(&b, r)
	fmt.Fprintf(&b, "\n%d of %d targets met.\n", met, len(r.Targets))
	return b.String()
}

// mark is ✓ or ✗ for every target of that name.
func mark(r *Report, name string) string {
	ok := true
	for _, t := range r.Targets {
		if t.Name == name && !t.Met {
			ok = false
		}
	}
	return tick(ok)
}

func tick(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}
