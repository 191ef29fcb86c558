package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// cell prints one figure of a point, marked * when the machine was the
// limit, and with the requests it did not serve.
func cell(p ScalePoint, ok bool, figure string) string {
	if !ok {
		return "-"
	}
	if p.MachineBound() {
		figure += "*"
	}
	if p.Failed > 0 {
		figure += fmt.Sprintf(" (%d not served)", p.Failed)
	}
	return figure
}

func writeScale(w io.Writer, s *Scale) {
	fmt.Fprintf(w, "%s, %s; each point %.1f s; * the machine's CPUs were idle < %.0f%% of it\n", s.Machine, s.Date, s.Seconds, 100*busyIdle)
	for _, table := range scaleTables(s) {
		fmt.Fprintf(w, "\n%s\n", table.title)
		for _, line := range table.rows {
			fmt.Fprintln(w, strings.Join(line, "\t"))
		}
	}
	for _, g := range s.Goals {
		fmt.Fprintf(w, "%s: %s, want %s %s\n", g.Name, g.Got, g.Want, tick(g.Met))
	}
}

type scaleTable struct {
	title string
	rows  [][]string // a header, then a row per version and replicas
}

// scaleTables are the curve as tables: sales/s, p99 and commands per sale,
// a row per version and number of replicas, a column per concurrency.
func scaleTables(s *Scale) []scaleTable {
	figures := []struct {
		title string
		of    func(ScalePoint) string
	}{
		{"sales/s", func(p ScalePoint) string { return fmt.Sprintf("%.0f", p.Sales) }},
		{"p99 ms", func(p ScalePoint) string { return fmt.Sprintf("%.1f", p.P99) }},
		{"Redis commands per sale (round trips)", func(p ScalePoint) string {
			return fmt.Sprintf("%.1f (%.1f)", p.CommandsPerSale, p.RoundTripsPerSale)
		}},
	}
	var out []scaleTable
	for _, f := range figures {
		t := scaleTable{title: f.title}
		head := []string{"version", "replicas"}
		for _, c := range s.concurrencies() {
			head = append(head, "c="+strconv.Itoa(c))
		}
		t.rows = append(t.rows, head)
		for _, row := range scaleRows {
			for _, n := range s.replicaCounts() {
				line := []string{strings.TrimSpace(row.Lock + " " + row.Wait), strconv.Itoa(n)}
				for _, c := range s.concurrencies() {
					p, ok := s.point(n, c, row)
					line = append(line, cell(p, ok, f.of(p)))
				}
				t.rows = append(t.rows, line)
			}
		}
		out = append(out, t)
	}
	return out
}

// scaleMarkdown is docs/performance.md's bench-scale section.
func scaleMarkdown(s *Scale) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured by `make bench-scale` on %s, %s: each point %.1f s through nginx, stock that never runs out, no business time (`-work 0`). A figure marked * was limited by the machine: its CPUs were idle less than %.0f%% of the point.\n", s.Date[:10], s.Machine, s.Seconds, 100*busyIdle)
	for _, t := range scaleTables(s) {
		fmt.Fprintf(&b, "\n**%s**\n\n", t.title)
		for i, line := range t.rows {
			fmt.Fprintf(&b, "| %s |\n", strings.Join(line, " | "))
			if i == 0 {
				b.WriteString("|---|---:|" + strings.Repeat("---:|", len(line)-2) + "\n")
			}
		}
	}
	b.WriteString("\n")
	for _, g := range s.Goals {
		fmt.Fprintf(&b, "- %s: %s, want %s %s\n", g.Name, g.Got, g.Want, tick(g.Met))
	}
	for _, n := range s.replicaCounts() {
		if g, ok := s.growth(n, "v6", "poll"); ok {
			fmt.Fprintf(&b, "- beside it, v6 poll, replicas=%d: %.1f -> %.1f commands per sale from c=%d to c=%d (%.2f x)\n", n, g.from, g.to, g.fromC, g.toC, g.to/g.from)
		}
	}
	return b.String()
}
