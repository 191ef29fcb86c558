package main

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

// The chart is well-formed SVG with a p99 and a p50 line per row that has a
// curve, one panel per lock, and latencies past the axis clamped onto it.
func TestLatencySVG(t *testing.T) {
	curve := []LoadPoint{{Offered: 250, P50: 0.5, P99: 3}, {Offered: 500, P50: 1, P99: 40}, {Offered: 1000, P50: 20, P99: 9000}}
	rows := []Row{
		{Lock: "v6", Wait: "poll", Load: curve},
		{Lock: "v6", Wait: "handoff", Load: curve},
		{Lock: "atomic", Load: curve},
		{Lock: "etcd", Wait: "watch", Load: curve},
		{Lock: "v7", Wait: "poll"}, // no curve: not drawn
	}
	svg := latencySVG(rows)
	dec := xml.NewDecoder(strings.NewReader(svg))
	lines, titles := 0, map[string]bool{}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, svg)
		}
		if el, ok := tok.(xml.StartElement); ok && el.Name.Local == "polyline" {
			lines++
			for _, a := range el.Attr {
				if a.Name.Local == "stroke" && (a.Value == "" || a.Value == "#000") {
					t.Errorf("a line with no colour of its own (stroke %q)", a.Value)
				}
			}
		}
		if cd, ok := tok.(xml.CharData); ok {
			titles[strings.TrimSpace(string(cd))] = true
		}
	}
	if lines != 8 {
		t.Fatalf("%d lines, want 8: p99 and p50 for each of 4 curves", lines)
	}
	for _, want := range []string{"v6", "atomic", "etcd"} {
		if !titles[want] {
			t.Errorf("no panel titled %q", want)
		}
	}
	if titles["v7"] {
		t.Error("a panel for v7, which has no curve")
	}
	if y := yOf(9000); y != 0 {
		t.Errorf("a latency above the axis is drawn at %.1f, want its top (0)", y)
	}
}

func TestNiceCeil(t *testing.T) {
	for in, want := range map[float64]float64{0: 1, 1: 1, 1.2: 2, 180: 200, 2304: 5000, 5000: 5000, 7001: 10000} {
		if got := niceCeil(in); got != want {
			t.Errorf("niceCeil(%v) = %v, want %v", in, got, want)
		}
	}
}
