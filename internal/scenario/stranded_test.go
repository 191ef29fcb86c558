package scenario

import (
	"net/http"
	"testing"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/versions"
)

// Only a version whose catalogue records a lost wake-up has its deadline's
// 503 taken for a stranded sale; every other keeps it.
func TestStranded(t *testing.T) {
	timeout := reply{status: http.StatusServiceUnavailable, code: api.CodeLockTimeout}
	for _, v := range versions.All {
		if got, want := stranded(v.Name, timeout), v.LostWakeup != ""; got != want {
			t.Errorf("%s: stranded %v, want %v", v.Name, got, want)
		}
	}
	for _, lock := range []string{"rueidislock", "rueidislock-1"} {
		if !losesWakeups(lock) {
			t.Fatalf("%s: no lost_wakeup in versions.json", lock)
		}
		if stranded(lock, reply{status: http.StatusOK}) || stranded(lock, reply{status: http.StatusServiceUnavailable, code: api.CodeUnavailable}) {
			t.Errorf("%s: a sale or an unavailable node taken for a stranded sale", lock)
		}
	}
}
