package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// replicaColours are the curve's lines, one per number of replicas.
var replicaColours = []string{"#1a73e8", "#e37400", "#1e8e3e", "#b00020", "#8e24aa", "#5f6368"}

// scaleSVG draws the curve: for each version, its Redis commands per sale
// and its sales/s against concurrency (a log axis), a line per number of
// replicas.
func scaleSVG(s *Scale) string {
	figures := []struct {
		name string
		of   func(ScalePoint) float64
	}{
		{"commands / sale", func(p ScalePoint) float64 { return p.CommandsPerSale }},
		{"sales/s", func(p ScalePoint) float64 { return p.Sales }},
	}
	rows := len(figures) * ((len(scaleRows) + perLine - 1) / perLine)
	width, height := perLine*panelW, rows*panelH+40
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/>`+"\n", width, height)
	i := 0
	for _, f := range figures {
		for _, row := range scaleRows {
			scalePanel(&b, (i%perLine)*panelW, (i/perLine)*panelH, row, f.name, f.of, s)
			i++
		}
		i = (i + perLine - 1) / perLine * perLine // each figure starts a line
	}
	y := rows*panelH + 14
	for j, n := range s.replicaCounts() {
		x := 10 + j*120
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"/><text x="%d" y="%d">%d replica(s)</text>`+"\n",
			x, x+24, y, y, replicaColours[j%len(replicaColours)], x+30, y+4, n)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// scalePanel draws one version's figure with its top-left corner at x, y.
func scalePanel(b *strings.Builder, x, y int, row Row, name string, of func(ScalePoint) float64, s *Scale) {
	conc := s.concurrencies()
	top := 0.0
	for _, p := range s.Points {
		if p.Lock == row.Lock && p.Wait == row.Wait {
			top = max(top, of(p))
		}
	}
	top = niceCeil(max(top, 1))
	ox, oy := float64(x+plotL), float64(y+plotT)
	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold" font-size="13">%s: %s</text>`+"\n", x+plotL, y+16,
		html.EscapeString(strings.TrimSpace(row.Lock+" "+row.Wait)), name)
	fmt.Fprintf(b, `<rect x="%.0f" y="%.0f" width="%d" height="%d" fill="#fafafa" stroke="#ccc"/>`+"\n", ox, oy, plotW, plotH)
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		py := oy + plotH*(1-float64(i)/4)
		fmt.Fprintf(b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#e0e0e0"/><text x="%.0f" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n",
			ox, ox+plotW, py, py, ox-4, py+4, trimFloat(v))
	}
	xOf := func(c int) float64 {
		if len(conc) < 2 {
			return ox + plotW/2
		}
		lo, hi := math.Log2(float64(conc[0])), math.Log2(float64(conc[len(conc)-1]))
		return ox + plotW*(math.Log2(float64(c))-lo)/(hi-lo)
	}
	for _, c := range conc {
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%d</text>`, xOf(c), oy+plotH+14, c)
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle" fill="#555">concurrent sales</text>`+"\n", ox+plotW/2, oy+plotH+28)
	for j, n := range s.replicaCounts() {
		var pts []string
		for _, c := range conc {
			if p, ok := s.point(n, c, row); ok {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(c), oy+plotH*(1-of(p)/top)))
			}
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.8" points="%s"><title>%d replica(s)</title></polyline>`+"\n",
			replicaColours[j%len(replicaColours)], strings.Join(pts, " "), n)
	}
}
