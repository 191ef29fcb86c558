// Package retry is the wait loop shared by the polling locks: try, and if the
// lock is taken, wait and try again until it is obtained or the caller gives up.
//
// The tutorial loops forever; a service must not, so every wait here ends when
// the caller's context does.
package retry

import (
	"context"
	"fmt"
	"time"
)

// Try makes one attempt. It reports whether the lock was obtained; an error
// means the attempt itself failed (Redis unreachable, a script error) and ends
// the wait at once: retrying against a dead node only hides the failure.
type Try func(ctx context.Context) (obtained bool, err error)

// Until calls try every interval until it obtains the lock, fails, or ctx
// ends. When ctx ends first it returns an error wrapping ctx.Err(), so callers
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
		ok, err := try(attemptCtx)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if timer == nil {
			timer = time.NewTimer(interval)
			defer timer.Stop()
		} else {
			timer.Reset(interval)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lock not obtained: %w", context.Cause(ctx))
		case <-timer.C:
		}
	}
}
