package loadtest

import "testing"

// A run that sold nothing, or served under half its requests, tested too
// little; one that served half or more, and sold, did not.
func TestTooLittle(t *testing.T) {
	for want, r := range map[string]Result{
		"sold nothing":     {Requests: 100, SoldOut: 100},
		"served 49 of 100": {Requests: 100, Sold: 49, Failed: 40, unknown: 11},
		"":                 {Requests: 100, Sold: 10, SoldOut: 40, Failed: 50},
	} {
		if got := r.tooLittle().Text; got != want {
			t.Errorf("%+v: %q, want %q", r, got, want)
		}
	}
}
