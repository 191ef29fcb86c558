package loadtest

import (
	"fmt"
	"html/template"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/checker"
	"github.com/locklab/locklab/internal/history"
)

// Timeline geometry, in pixels.
const (
	laneLabel  = 110  // the lane names' column
	laneHeight = 26   // one lane
	minWidth   = 1100 // the drawing's width at the least
	maxWidth   = 40000
	pxPerMs    = 0.5 // at the most this wide a run grows: 2 s of it fill a screen
)

// bar is one sale on the timeline.
type bar struct {
	lane     int
	from, to time.Time
	who      string // its owner (or, with no lock, the sale itself)
	title    string
	red      bool
}

// Timeline draws one run's sales as one self-contained SVG (no script, no
// font): one lane per replica, each sale a bar from the lock obtained to its
// release sent, the time its holder believed it held the lock (for a version
// with no lock, from its read to its write); bars that overlap another
// owner's in red: two holders at once. Fenced refusals are marked ×, unknown
// outcomes ? on the client's lane, injected faults as dashed lines. The
// drawing grows with the run's length, so a thousand sales stay apart: the
// page scrolls it.
func Timeline(sales []history.Sale, ops []checker.Op, marks []history.Mark) template.HTML {
	if len(sales) == 0 && len(ops) == 0 {
		return ""
	}
	lanes, bars := lay(sales)
	start, end := span(sales, ops, marks)
	dur := max(end.Sub(start), time.Millisecond)
	width := min(max(minWidth, int(pxPerMs*float64(dur.Milliseconds()))), maxWidth)
	x := func(t time.Time) float64 {
		return laneLabel + float64(width-laneLabel-10)*float64(t.Sub(start))/float64(dur)
	}
	client := len(lanes) // the client's lane, for unknown outcomes
	height := 30 + laneHeight*(len(lanes)+1) + 20

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`, width, height)
	axis(&b, x, start, dur, height)
	for i, name := range append(lanes, "client: unknown") {
		y := 30 + laneHeight*i
		fmt.Fprintf(&b, `<rect x="0" y="%d" width="%d" height="%d" fill="%s"/>`, y, width, laneHeight, []string{"#fafafa", "#f2f2f2"}[i%2])
		fmt.Fprintf(&b, `<text x="6" y="%d">%s</text>`, y+17, template.HTMLEscapeString(name))
	}
	for _, br := range bars {
		fill := "#1a73e8"
		if br.red {
			fill = "#d93025"
		}
		y := 30 + laneHeight*br.lane + 5
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" fill-opacity="0.75"><title>%s</title></rect>`,
			x(br.from), y, max(1, x(br.to)-x(br.from)), laneHeight-10, fill, template.HTMLEscapeString(br.title))
	}
	for _, s := range sales {
		if s.Refused {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#e37400" font-size="15" text-anchor="middle">×<title>%s refused by fencing (token %d)</title></text>`,
				x(s.End), 30+laneHeight*slices.Index(lanes, s.Replica)+19, template.HTMLEscapeString(s.ID), s.Token)
		}
	}
	for _, op := range ops {
		if op.Outcome == api.Unknown {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#8e24aa" font-size="14" text-anchor="middle">?<title>%s: outcome unknown</title></text>`,
				x(op.Invoke), 30+laneHeight*client+18, template.HTMLEscapeString(op.ID))
		}
	}
	for _, m := range marks {
		at, anchor, dx := x(m.At), "start", 3.0
		if at > float64(width)/2 { // a label on the right half ends at its line, inside the drawing
			anchor, dx = "end", -3
		}
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="24" y2="%d" stroke="#5f6368" stroke-dasharray="4 3"/><text x="%.1f" y="%d" fill="#3c4043" text-anchor="%s">%s</text>`,
			at, at, height-18, at+dx, height-6, anchor, template.HTMLEscapeString(m.Label))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every string in it was escaped above
}

// lay puts each sale in its replica's lane and marks the bars that overlap
// another owner's.
func lay(sales []history.Sale) (lanes []string, bars []bar) {
	for _, s := range sales {
		if !slices.Contains(lanes, s.Replica) {
			lanes = append(lanes, s.Replica)
		}
	}
	slices.Sort(lanes)
	for _, s := range sales {
		from, to, ok := s.Held()
		who := s.Owner
		if !ok { // no lock: the sale's own read-modify-write
			from, to, who = s.Read.At, s.Written.At, s.ID
			if from.IsZero() || to.IsZero() {
				continue
			}
		}
		title := fmt.Sprintf("%s on %s: %s to %s", s.ID, s.Replica, from.Format("15:04:05.000000"), to.Format("15:04:05.000000"))
		if !s.Read.At.IsZero() {
			title += fmt.Sprintf(", read %d", s.Read.Value)
		}
		if !s.Written.At.IsZero() {
			title += fmt.Sprintf(", wrote %d", s.Written.Value)
		}
		bars = append(bars, bar{lane: slices.Index(lanes, s.Replica), from: from, to: to, who: who, title: title})
	}
	slices.SortFunc(bars, func(a, b bar) int { return a.from.Compare(b.from) })
	ws := make([]checker.Window, len(bars))
	for i, b := range bars {
		ws[i] = checker.Window{Who: b.who, From: b.from, To: b.to}
	}
	for i, red := range checker.Overlapping(ws) {
		if bars[i].red = red; red {
			bars[i].title += " (overlaps another holder)"
		}
	}
	return lanes, bars
}

// span is the time the drawing covers.
func span(sales []history.Sale, ops []checker.Op, marks []history.Mark) (start, end time.Time) {
	see := func(t time.Time) {
		if t.IsZero() {
			return
		}
		if start.IsZero() || t.Before(start) {
			start = t
		}
		if t.After(end) {
			end = t
		}
	}
	for _, s := range sales {
		see(s.Start)
		see(s.End)
	}
	for _, op := range ops {
		see(op.Invoke)
		if op.Outcome != api.Unknown {
			see(op.Return)
		}
	}
	for _, m := range marks {
		see(m.At)
	}
	return start, end
}

// axis draws the time axis: milliseconds from the start, at round steps.
func axis(b *strings.Builder, x func(time.Time) float64, start time.Time, dur time.Duration, height int) {
	step := time.Duration(math.Pow(10, math.Floor(math.Log10(float64(dur)/8))))
	for _, k := range []time.Duration{1, 2, 5, 10} {
		if dur/(step*k) <= 12 {
			step *= k
			break
		}
	}
	for t := time.Duration(0); t <= dur; t += step {
		at := x(start.Add(t))
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="22" y2="%d" stroke="#e0e0e0"/><text x="%.1f" y="16" fill="#5f6368" text-anchor="middle">%s</text>`,
			at, at, height-20, at, t.Round(time.Microsecond).String())
	}
}
