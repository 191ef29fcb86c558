package main

import (
	"fmt"
	"html"
	"math"
	"os"
	"slices"
	"strings"
)

// The latency-vs-offered-load chart: one panel per lock, a line per wait
// (p99 solid, p50 dashed), latency on a log scale so that polling's hundreds
// of milliseconds and a hand-off's tens sit in one picture.
const (
	panelW, panelH = 290, 210 // one panel, with its margins
	plotL, plotT   = 46, 26   // the plot's offset inside its panel
	plotW, plotH   = 228, 150
	perLine        = 4
	minMS, maxMS   = 0.1, 3000.0 // the y axis
)

// waits are the legend's entries, in order: each way of waiting (etcd's is
// its own watch), then atomic's none.
var waits = []struct{ wait, name, colour string }{
	{"poll", "poll", "#b00020"}, {"notify", "notify", "#e37400"}, {"handoff", "handoff", "#1a73e8"},
	{"watch", "watch (etcd)", "#8e24aa"}, {"", "no lock (atomic)", "#5f6368"},
}

// waitColour is a wait's line colour (black for one the legend lacks, so a
// new wait is never drawn invisible).
func waitColour(wait string) string {
	for _, w := range waits {
		if w.wait == wait {
			return w.colour
		}
	}
	return "#000"
}

// latencySVG draws rows' latency curves.
func latencySVG(rows []Row) string {
	var locks []string
	byLock := map[string][]Row{}
	for _, r := range rows {
		if len(r.Load) == 0 {
			continue
		}
		if _, ok := byLock[r.Lock]; !ok {
			locks = append(locks, r.Lock)
		}
		byLock[r.Lock] = append(byLock[r.Lock], r)
	}
	lines := (len(locks) + perLine - 1) / perLine
	width, height := perLine*panelW, lines*panelH+40
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/>`+"\n", width, height)
	for i, lock := range locks {
		panel(&b, (i%perLine)*panelW, (i/perLine)*panelH, lock, byLock[lock])
	}
	legend(&b, 10, lines*panelH+14)
	b.WriteString("</svg>\n")
	return b.String()
}

// panel draws one lock's curves with its top-left corner at x, y.
func panel(b *strings.Builder, x, y int, lock string, rows []Row) {
	top := 0.0
	for _, r := range rows {
		for _, p := range r.Load {
			top = max(top, p.Offered)
		}
	}
	top = niceCeil(top)
	ox, oy := float64(x+plotL), float64(y+plotT)
	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold" font-size="13">%s</text>`+"\n", x+plotL, y+16, html.EscapeString(lock))
	fmt.Fprintf(b, `<rect x="%.0f" y="%.0f" width="%d" height="%d" fill="#fafafa" stroke="#ccc"/>`+"\n", ox, oy, plotW, plotH)
	for ms := minMS; ms <= maxMS; ms *= 10 {
		py := oy + yOf(ms)
		fmt.Fprintf(b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#e0e0e0"/>`, ox, ox+plotW, py, py)
		fmt.Fprintf(b, `<text x="%.0f" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", ox-4, py+4, trimFloat(ms))
	}
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		px := ox + plotW*float64(i)/4
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%.0f</text>`, px, oy+plotH+14, v)
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle" fill="#555">offered sales/s</text>`+"\n", ox+plotW/2, oy+plotH+28)
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" fill="#555" transform="rotate(-90 %.0f %.0f)" text-anchor="middle">ms</text>`+"\n",
		ox-34, oy+plotH/2, ox-34, oy+plotH/2)
	for _, r := range rows {
		colour := waitColour(r.Wait)
		for _, line := range []struct {
			dash string
			ms   func(LoadPoint) float64
		}{{"", func(p LoadPoint) float64 { return p.P99 }}, {` stroke-dasharray="4 3"`, func(p LoadPoint) float64 { return p.P50 }}} {
			var pts []string
			for _, p := range r.Load {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", ox+plotW*p.Offered/top, oy+yOf(line.ms(p))))
			}
			fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.8"%s points="%s"><title>%s %s</title></polyline>`+"\n",
				colour, line.dash, strings.Join(pts, " "), html.EscapeString(strings.TrimSpace(r.Lock+" "+r.Wait)), curveText(r.Load))
		}
	}
}

// yOf is ms's height below the plot's top, on the log axis, clamped to it.
func yOf(ms float64) float64 {
	ms = min(max(ms, minMS), maxMS)
	return plotH * (1 - (math.Log10(ms)-math.Log10(minMS))/(math.Log10(maxMS)-math.Log10(minMS)))
}

func legend(b *strings.Builder, x, y int) {
	for i, w := range waits {
		lx := x + i*130
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"/><text x="%d" y="%d">%s</text>`+"\n",
			lx, lx+24, y, y, w.colour, lx+30, y+4, w.name)
	}
	lx := x + len(waits)*130
	fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#333" stroke-width="1.8"/><text x="%d" y="%d">p99</text>`, lx, lx+24, y, y, lx+30, y+4)
	fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#333" stroke-width="1.8" stroke-dasharray="4 3"/><text x="%d" y="%d">p50 (latency from each request's due time)</text>`+"\n",
		lx+70, lx+94, y, y, lx+100, y+4)
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", v), "0"), ".")
}

// writeCharts writes the chart and the HTML report, when asked for.
func writeCharts(o options, rep *Report) error {
	if !slices.ContainsFunc(rep.Rows, func(r Row) bool { return len(r.Load) > 0 }) {
		return nil
	}
	svg := latencySVG(rep.Rows)
	if o.chart != "" {
		if err := os.WriteFile(o.chart, []byte(svg), 0o644); err != nil {
			return err
		}
	}
	if o.report == "" {
		return nil
	}
	var table strings.Builder
	writeTable(&table, rep)
	page := fmt.Sprintf(`<!doctype html><html><head><meta charset="utf-8"><title>locklab bench</title>
<style>body{font-family:sans-serif;margin:24px;color:#202124}pre{font-size:10.5px;overflow-x:auto}</style></head><body>
<h1>locklab: make bench</h1>
<p>Every version through nginx at c=%d against its own ceilings, then its latency at a fixed arrival rate: an open model at 1/4, 1/2, 3/4 and 1 x the row's closed-loop sales/s, latency counted from each request's due time.</p>
<h2>Latency against offered load</h2>
%s
<h2>The table</h2>
<pre>%s</pre>
</body></html>
`, rep.Concurrency, svg, html.EscapeString(table.String()))
	return os.WriteFile(o.report, []byte(page), 0o644)
}
