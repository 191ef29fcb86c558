package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/locklab/locklab/internal/scenario"
)

// On Compose the scenarios that cannot run there are passed over, each
// said once; on the local cluster every chosen scenario runs; one named
// scenario is the only one.
func TestOnStack(t *testing.T) {
	names := func(o options, stderr *bytes.Buffer) []string {
		var got []string
		for s := range onStack(o, stderr) {
			got = append(got, s.Name)
		}
		return got
	}
	var said bytes.Buffer
	onCompose := names(options{scenario: "all", compose: "locklab"}, &said)
	skipped := 0
	for _, s := range scenario.All {
		ok, why := s.OnCompose()
		if ok != slices.Contains(onCompose, s.Name) {
			t.Errorf("on Compose, %s: yielded %v, want %v", s.Name, !ok, ok)
		}
		line := "loadtest: scenario " + s.Name + " skipped on Compose: " + why + "\n"
		if n := strings.Count(said.String(), line); n != map[bool]int{true: 0, false: 1}[ok] {
			t.Errorf("on Compose, %s said skipped %d times", s.Name, n)
		}
		if !ok {
			skipped++
		}
	}
	if skipped == 0 || len(onCompose) == 0 {
		t.Fatalf("no scenario both runs and is skipped on Compose (%d skipped): the test proves nothing", skipped)
	}
	var none bytes.Buffer
	if got := names(options{scenario: "all"}, &none); len(got) != len(scenario.All) || none.Len() != 0 {
		t.Errorf("on the local cluster: %d of %d scenarios, said %q", len(got), len(scenario.All), none.String())
	}
	one := scenario.All[len(scenario.All)-1].Name
	if got := names(options{scenario: one}, &none); !slices.Equal(got, []string{one}) {
		t.Errorf("-scenario %s: %v", one, got)
	}
}
