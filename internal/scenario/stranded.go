package scenario

import (
	"errors"
	"net/http"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/versions"
)

// errStranded is a sale of a version known to lose wake-ups (its
// catalogue's lost_wakeup: rueidislock's) that waited until its acquire
// deadline with the lock free. That is the library's liveness flaw, which
// the lost-wakeup cell measures, not what the cell that met it is about:
// Run runs that cell once more and says so in its detail; a second
// stranding in a row is the cell's error.
//
// rueidislock v1.0.79's waiter sleeps until an invalidation of a key it
// read, and two ways leave it none (both seen on Compose):
// an attempt that never reached Redis (each key's attempt,
// redial included, gets TryNextAfter, 20 ms: a connection closed while its
// node was frozen past ConnWriteTimeout is dialled again inside the next
// attempt, and on Compose that dial resolves the node's name through
// Docker's DNS), so no key was read; and a failed attempt counted only after
// its monitoring goroutine started, which, when it runs first, takes the
// failure for a released lock and removes the waiter's gate, so the
// invalidation finds no one to wake. With one key (rueidislock-1) a single
// such attempt strands the sale.
var errStranded = errors.New("waited until its acquire deadline with the lock free (the library's documented lost wake-up)")

// losesWakeups reports whether lock is a version known to lose wake-ups.
func losesWakeups(lock string) bool {
	v, _ := versions.Lookup(lock)
	return v.LostWakeup != ""
}

// stranded reports whether r, a sale of lock sent while the lock was free,
// waited until its acquire deadline (its 503 lock_timeout) and lock is known
// to lose wake-ups. For every other version such a reply stays what the
// cell makes of it.
func stranded(lock string, r reply) bool {
	return losesWakeups(lock) && r.err == nil && r.status == http.StatusServiceUnavailable && r.code == api.CodeLockTimeout
}
