package lab

import (
	"slices"
	"testing"
)

// The page draws what the server marks: a hold is red when the checker's
// definition says it overlapped another owner's hold of the same version,
// and a hold published earlier is marked when a later one overlaps it.
func TestMarkOverlaps(t *testing.T) {
	hs := []Hold{
		{Lock: "v2", ID: "a", Owner: "A", From: 0, To: 100},
		{Lock: "v2", ID: "b", Owner: "A", From: 50, To: 150},  // A's own again: not two holders
		{Lock: "v6", ID: "c", Owner: "C", From: 60, To: 160},  // another version's
		{Lock: "v2", ID: "d", Owner: "D", From: 100, To: 200}, // starts as a ends: no overlap with a
	}
	if newly := markOverlaps(hs); !slices.Equal(newly, []string{"bv2", "dv2"}) {
		t.Errorf("newly marked %v, want [bv2 dv2] (b and D's d overlap; a ends as d starts)", newly)
	}
	if hs[0].Overlaps || hs[2].Overlaps {
		t.Errorf("a or c marked: %+v", hs)
	}
	hs = append(hs, Hold{Lock: "v2", ID: "e", Owner: "E", From: 10, To: 20})
	if newly := markOverlaps(hs); !slices.Equal(newly, []string{"av2", "ev2"}) {
		t.Errorf("after e: newly marked %v, want [av2 ev2]", newly)
	}
	if newly := markOverlaps(hs); len(newly) != 0 {
		t.Errorf("marked again: %v", newly)
	}
}
