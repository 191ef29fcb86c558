// Package retry composes waiting around a guard that makes one attempt: try,
// and if the lock is taken, wait and try again until it is obtained or the
// caller gives up. No guard waits by itself; versions are built by wrapping
// each guard in one of these:
//
//   - Poll tries every interval (jittered): the tutorial's way.
//   - Notify queues in Redis and is woken by the release (-wait notify).
//   - Local wakes a process's own waiters at each release through it: for a
//     lock that lives in the process (v1's mutex), which nothing else frees.
//
// The tutorial loops forever; a service must not, so every wait here ends when
// the caller's context does. Each wrapper counts the attempts of every
// acquisition and tells its counter, so polling's waste can be seen.
package retry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/locklab/locklab/internal/lease"
)

// Guard makes one attempt: a lease, lease.ErrTaken when another owner holds
// the lock, or another error when the attempt itself failed (Redis
// unreachable, a script error), which ends the wait at once: retrying against
// a dead node only hides the failure.
type Guard interface {
	TryAcquire(ctx context.Context, owner string) (lease.Lease, error)
}

// Counter is told how many attempts one acquisition made, obtained or not.
// A nil Counter is not told.
type Counter func(attempts int)

func (c Counter) add(attempts int) {
	if c != nil {
		c(attempts)
	}
}

// DefaultInterval is Poll's interval when none is given: the tutorial's 20 ms.
const DefaultInterval = 20 * time.Millisecond

// Poller waits for a guard by trying it about every interval.
type Poller struct {
	g        Guard
	interval time.Duration
	count    Counter
}

// Poll returns g waiting by polling every interval (DefaultInterval when <= 0).
func Poll(g Guard, interval time.Duration, count Counter) *Poller {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Poller{g: g, interval: interval, count: count}
}

// Acquire tries about every interval until it obtains the lock, an attempt
// fails, or ctx ends. Each wait is drawn uniformly from [interval/2,
// 3*interval/2): the mean is the interval (the tutorial's 20 ms), but waiters
// do not stay locked to one phase of the holder's cycle. With a fixed period,
// the waiters whose phase happens to trail each release lose every round and
// wait until their deadline while others are served (measured here: tail
// latencies near the 10 s deadline for redlock under 100 waiters); jitter
// makes every round a fresh draw.
//
// When ctx ends first it returns an error wrapping context.Cause(ctx), so
// callers can tell a deadline (context.DeadlineExceeded) from a client that
// went away (context.Canceled). Each attempt runs to completion even if ctx
// ends while it is in flight, so its outcome is always known: a lock obtained
// just as ctx ended is returned, and the caller, who holds it, releases it.
func (p *Poller) Acquire(ctx context.Context, owner string) (lease.Lease, error) {
	attempts := 0
	defer func() { p.count.add(attempts) }()
	return until(ctx, p.interval, &attempts, func(ctx context.Context) (lease.Lease, error) {
		return p.g.TryAcquire(ctx, owner)
	})
}

// until calls try about every interval (jittered) until it obtains a lease,
// fails, or ctx ends, counting its attempts in *attempts.
func until(ctx context.Context, interval time.Duration, attempts *int, try func(context.Context) (lease.Lease, error)) (lease.Lease, error) {
	attemptCtx := context.WithoutCancel(ctx)
	var timer *time.Timer
	for {
		*attempts++
		l, err := try(attemptCtx)
		if !errors.Is(err, lease.ErrTaken) {
			return l, err // obtained, or failed
		}
		wait := interval/2 + rand.N(interval)
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return nil, notObtained(ctx, *attempts)
		case <-timer.C:
		}
	}
}

// notObtained is a wait that ended with ctx. It says how many attempts were
// refused: a crowd's lottery (one waiter refused at each of its tries) is
// told from a lock that nobody could take.
func notObtained(ctx context.Context, attempts int) error {
	return fmt.Errorf("lock not obtained after %d attempts: %w", attempts, context.Cause(ctx))
}

// Localer waits for a lock that lives in this process.
type Localer struct {
	g     Guard
	count Counter

	mu   sync.Mutex
	wake chan struct{} // closed, and replaced, at each release
}

// Local returns g waiting for releases made through the returned Localer:
// every release wakes the waiters, who try again at once. Only for a lock
// that nothing outside this process can take or free (v1's mutex): it has no
// timer.
func Local(g Guard, count Counter) *Localer {
	return &Localer{g: g, count: count, wake: make(chan struct{})}
}

// Acquire tries until it obtains the lock or ctx ends, waiting between
// attempts for the next release.
func (w *Localer) Acquire(ctx context.Context, owner string) (lease.Lease, error) {
	attempts := 0
	defer func() { w.count.add(attempts) }()
	for {
		w.mu.Lock()
		wake := w.wake // taken before the attempt: a release after it still wakes us
		w.mu.Unlock()
		attempts++
		l, err := w.g.TryAcquire(ctx, owner)
		switch {
		case err == nil:
			return lease.WithRelease(l, func(ctx context.Context) error {
				defer w.released()
				return l.Release(ctx)
			}), nil
		case !errors.Is(err, lease.ErrTaken):
			return nil, err
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, notObtained(ctx, attempts)
		}
	}
}

func (w *Localer) released() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.wake)
	w.wake = make(chan struct{})
}
