// Package lease is the contract between the locks and the code they protect:
// a guard makes one attempt and, when it obtains the lock, hands back a Lease.
// Everything the holder needs to know later travels with the lease (bsm's
// *Lock, etcd's Mutex and Consul's lost channel do the same): how to release
// it, its fencing token, and whether it is known to be lost.
//
// Waiting for a taken lock is not a guard's concern: package retry composes
// it around a guard, in one place.
package lease

import (
	"context"
	"errors"
)

// Lease is a lock held by one owner.
type Lease interface {
	// Release gives the lock back. It returns ErrNotHeld (possibly wrapped)
	// when the lock was no longer this owner's: its lease had expired.
	Release(ctx context.Context) error
	// Token is the fencing token issued with this hold (it grows with every
	// new holder), or 0 when the lock was taken without fencing.
	Token() int64
	// Lost is closed once the lock is known to be lost while still held
	// (v8's watchdog finding its lease gone). A nil channel, never closed,
	// means the guard cannot tell: most cannot.
	Lost() <-chan struct{}
}

var (
	// ErrTaken means another owner holds the lock: the attempt obtained
	// nothing and may be repeated.
	ErrTaken = errors.New("lease: lock taken")
	// ErrNotHeld means a release found the lock gone or held by another
	// owner: the lease expired while its holder still worked. Any other
	// release error (a timeout, a node down) is not this one.
	ErrNotHeld = errors.New("lease: lock not held at release")
)

// New returns a Lease from its parts: release, the token (0: unfenced) and
// the lost channel (nil: never known lost).
func New(release func(context.Context) error, token int64, lost <-chan struct{}) Lease {
	return held{release: release, token: token, lost: lost}
}

// Timed returns a Lease whose Lost is d's: lost when its deadline passes.
// IsLost then also reads the clock, so a holder checking right after a
// freeze sees the lease gone before d's timer has caught up.
func Timed(release func(context.Context) error, token int64, d *Deadline) Lease {
	return held{release: release, token: token, lost: d.Lost(), deadline: d}
}

type held struct {
	release  func(context.Context) error
	token    int64
	lost     <-chan struct{}
	deadline *Deadline // nil: untimed
}

func (h held) Release(ctx context.Context) error { return h.release(ctx) }
func (h held) Token() int64                      { return h.token }
func (h held) Lost() <-chan struct{}             { return h.lost }

// WithRelease returns l with release in place of its own: the token and the
// lost channel stay. A wrapper uses it to act around the release (wake the
// next waiter, stop a watchdog), calling l.Release itself.
func WithRelease(l Lease, release func(context.Context) error) Lease {
	h := held{release: release, token: l.Token(), lost: l.Lost()}
	if t, ok := l.(held); ok {
		h.deadline = t.deadline
	}
	return h
}

// IsLost reports whether l is known lost now, without waiting.
func IsLost(l Lease) bool {
	if h, ok := l.(held); ok && h.deadline != nil && h.deadline.Passed() {
		return true
	}
	select {
	case <-l.Lost():
		return true
	default:
		return false
	}
}
