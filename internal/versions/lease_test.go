package versions_test

import (
	"strings"
	"testing"

	"github.com/locklab/locklab/internal/scenario"
	"github.com/locklab/locklab/internal/versions"
)

// A version's Lease (the lab marks where a fixed one ran out under a hold)
// agrees with what the slow-holder scenario measures of it: a fixed lease
// runs out under a slow holder and its successor's sale oversells; a
// renewed one, or none that runs out (db-getlock), does not.
func TestLeaseAgreesWithSlowHolder(t *testing.T) {
	var expect map[string]string
	for _, s := range scenario.All {
		if s.Name == "slow-holder" {
			expect = s.Expect
		}
	}
	if len(expect) == 0 {
		t.Fatal("no slow-holder scenario")
	}
	for _, v := range versions.All {
		switch v.Lease {
		case "", "fixed", "renewed":
		default:
			t.Errorf("%s: lease %q, want fixed, renewed or empty", v.Name, v.Lease)
		}
		if v.NoLease && v.Lease != "" {
			t.Errorf("%s: no_lease, yet lease %q", v.Name, v.Lease)
		}
		want, ok := expect[v.Name]
		if !ok {
			continue
		}
		if oversells := strings.HasPrefix(want, "oversell"); oversells != (v.Lease == "fixed") {
			t.Errorf("%s: lease %q, but slow-holder expects %q", v.Name, v.Lease, want)
		}
	}
}
