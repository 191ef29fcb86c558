package lab

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/locklab/locklab/internal/scenario"
	"github.com/locklab/locklab/internal/versions"
)

// Settings are what a run asks for: the load test's settings.
type Settings struct {
	Locks       []string `json:"locks"`
	Wait        string   `json:"wait"` // "": as the replicas' -wait
	Fence       bool     `json:"fence"`
	Requests    int      `json:"requests"` // per version
	Concurrency int      `json:"concurrency"`
	Stock       int64    `json:"stock"`
	// Nemesis runs each version for Seconds under the seeded schedule of
	// faults Seed draws (the load test's -nemesis), at a steady rate:
	// Requests and Stock then follow from Seconds. It needs the cells'
	// cluster (make lab).
	Nemesis bool   `json:"nemesis,omitempty"`
	Seed    uint64 `json:"seed,omitempty"`
	Seconds int    `json:"seconds,omitempty"`
}

// The nemesis's bounds: long enough for a few faults of a 1 s lease, short
// enough to watch.
const minNemesis, maxNemesis = 5, 120

// validate says, in a sentence the page shows, what is wrong with s.
func (s Settings) validate() error {
	names := versions.Names()
	switch {
	case len(s.Locks) == 0:
		return errors.New("choose at least one version")
	case s.Wait != "" && !slices.Contains(versions.Waits, s.Wait):
		return fmt.Errorf("wait %q: want one of %s", s.Wait, strings.Join(versions.Waits, ", "))
	// Divided, not multiplied: Requests*len(Locks) wraps for a Requests
	// near 2^63 and would let a run of ~4.6e18 sales through.
	case s.Requests < 1 || s.Requests > MaxRequests/len(s.Locks):
		return fmt.Errorf("requests %d for %d version(s): want 1 or more, and at most %d in all", s.Requests, len(s.Locks), MaxRequests)
	case s.Concurrency < 1 || s.Concurrency > MaxConcurrency:
		return fmt.Errorf("concurrency %d: want 1-%d", s.Concurrency, MaxConcurrency)
	case s.Stock < 0 || s.Stock > MaxStock:
		return fmt.Errorf("stock %d: want 0-%d", s.Stock, MaxStock)
	case s.Nemesis && (s.Seconds < minNemesis || s.Seconds > maxNemesis):
		return fmt.Errorf("the nemesis for %d s: want %d-%d s", s.Seconds, minNemesis, maxNemesis)
	case s.Nemesis && s.Seconds > MaxRequests/(scenario.NemesisRate*len(s.Locks)):
		return fmt.Errorf("the nemesis for %d s on %d version(s) sends %d requests: at most %d in all", s.Seconds, len(s.Locks), scenario.NemesisRate*s.Seconds*len(s.Locks), MaxRequests)
	}
	for i, lock := range s.Locks {
		if !slices.Contains(names, lock) {
			return fmt.Errorf("version %q: want one of %s", lock, strings.Join(names, ", "))
		}
		if slices.Contains(s.Locks[:i], lock) {
			return fmt.Errorf("version %q is chosen twice", lock)
		}
		// Every fenced sale of a version with no token is refused: the run
		// would sell nothing, and show nothing about the lock.
		if v, _ := versions.Lookup(lock); s.Fence && !v.Fences() {
			return fmt.Errorf("fencing: %s hands out no fencing token; the versions that fence: %s", lock, strings.Join(versions.Fencing(), ", "))
		}
	}
	return nil
}
