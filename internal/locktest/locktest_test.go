package locktest

import (
	"time"

	"testing"

	"github.com/locklab/locklab/internal/locks/retry"
	mutex "github.com/locklab/locklab/internal/locks/v1_mutex"
	"github.com/locklab/locklab/internal/redistest"
)

// The exclusion check must catch a guard that does not exclude: two process
// mutexes stand for two replicas, each locking only itself.
func TestExclusionCatchesOverlap(t *testing.T) {
	rdb := redistest.Start(t).Client()
	if _, err := exclusion(rdb, "locktest:self", retry.Local(mutex.New(), nil), retry.Local(mutex.New(), nil), 30*time.Second, false); err == nil {
		t.Fatal("exclusion passed two independent mutexes; it must report the overlap")
	}
}
