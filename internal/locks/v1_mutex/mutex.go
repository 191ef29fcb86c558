// Package mutex is the tutorial's v1 and v2: a lock that lives in the
// process. It serialises the goroutines of one replica and nothing else, so a
// second replica behind nginx sells the same unit again. That is the lesson.
package mutex

import (
	"context"
	"fmt"
)

// Locker behaves as the tutorial's sync.Mutex, except that a waiter gives up
// when its context ends (a sync.Mutex cannot be abandoned, so a request whose
// client left would still queue for it). A one-slot channel is that mutex.
type Locker struct {
	slot chan struct{}
}

// New returns an unlocked Locker.
func New() *Locker {
	return &Locker{slot: make(chan struct{}, 1)}
}

// Acquire waits until the process-wide lock is free or ctx ends. The owner is
// ignored: inside one process the lock needs no name.
func (l *Locker) Acquire(ctx context.Context, _ string) (func(context.Context) error, error) {
	select {
	case l.slot <- struct{}{}:
		return l.release, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("mutex: lock not obtained: %w", context.Cause(ctx))
	}
}

func (l *Locker) release(context.Context) error {
	<-l.slot
	return nil
}
