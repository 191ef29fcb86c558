// Package mutex is the tutorial's v1 and v2: a lock that lives in the
// process. It serialises the goroutines of one replica and nothing else, so a
// second replica behind nginx sells the same unit again. That is the lesson.
package mutex

import (
	"context"
	"sync"

	"github.com/locklab/locklab/internal/lease"
)

// Locker is the tutorial's sync.Mutex. Its waiting is composed outside it
// (retry.Local wakes this process's waiters at each release), as for every
// other guard, so a waiter can also give up when its request ends, which
// sync.Mutex.Lock cannot.
type Locker struct {
	mu sync.Mutex
}

// New returns an unlocked Locker.
func New() *Locker { return &Locker{} }

// TryAcquire takes the process-wide lock if it is free, or returns
// lease.ErrTaken. The owner is ignored: inside one process the lock needs no
// name.
func (l *Locker) TryAcquire(_ context.Context, _ string) (lease.Lease, error) {
	// lesson:begin v1 v2
	if !l.mu.TryLock() {
		return nil, lease.ErrTaken
	}
	return lease.New(func(context.Context) error { l.mu.Unlock(); return nil }, 0, nil), nil
	// lesson:end
}
