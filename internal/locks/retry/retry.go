// Package retry is the wait loop shared by the locks: try, and if the lock is
// taken, wait and try again until it is obtained or the caller gives up. The
// wait is a poll every interval (Until, the tutorial's way) or a wake-up when
// the holder publishes its release (Notifier, -wait notify).
//
// The tutorial loops forever; a service must not, so every wait here ends when
// the caller's context does.
package retry

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// Try makes one attempt. It reports whether the lock was obtained; an error
// means the attempt itself failed (Redis unreachable, a script error) and ends
// the wait at once: retrying against a dead node only hides the failure.
type Try func(ctx context.Context) (obtained bool, err error)

// Until calls try about every interval until it obtains the lock, fails, or
// ctx ends. Each wait is drawn uniformly from [interval/2, 3*interval/2): the
// mean is the interval (the tutorial's 20 ms), but waiters do not stay locked
// to one phase of the holder's cycle. With a fixed period, the waiters whose
// phase happens to trail each release lose every round and wait until their
// deadline while others are served (measured here: tail latencies near the
// 10 s deadline for redlock under 100 waiters); jitter makes every round a
// fresh draw. When ctx ends first it returns an error wrapping ctx.Err(), so callers
// can tell a deadline (context.DeadlineExceeded) from a client that went away
// (context.Canceled).
//
// Each attempt runs to completion even if ctx ends while it is in flight, so its
// outcome is always known: a lock obtained just as ctx ended is reported as
// obtained, and the caller, who holds it, releases it. Nothing is left behind.
func Until(ctx context.Context, interval time.Duration, try Try) error {
	attemptCtx := context.WithoutCancel(ctx)
	var timer *time.Timer
	for {
		ok, err := attempt(ctx, attemptCtx, try)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		wait := interval
		if interval > 0 {
			wait = interval/2 + rand.N(interval)
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lock not obtained: %w", context.Cause(ctx))
		case <-timer.C:
		}
	}
}

// Wait is the lock's wait for owner: with a Notifier, its Until; otherwise a
// poll every interval. A lock obtained here is given back with Done.
func Wait(ctx context.Context, n *Notifier, interval time.Duration, owner string, try Try) error {
	if n != nil {
		return n.Until(ctx, owner, try)
	}
	return Until(ctx, interval, try)
}

// Done tells n, if any, that owner gave back a hold obtained with Wait: with
// the lock free, the next waiter is woken. Call it after the release.
func Done(ctx context.Context, n *Notifier, owner string) {
	if n != nil {
		n.released(ctx, owner)
	}
}

type attemptsKey struct{}

// CountAttempts returns a context under which every attempt of a wait is
// counted in *n: how many tries an acquisition took, for the metrics.
func CountAttempts(ctx context.Context, n *int) context.Context {
	return context.WithValue(ctx, attemptsKey{}, n)
}

// attempt runs try under attemptCtx and counts it when ctx asks to.
func attempt(ctx, attemptCtx context.Context, try Try) (bool, error) {
	if n, ok := ctx.Value(attemptsKey{}).(*int); ok {
		*n++
	}
	return try(attemptCtx)
}
