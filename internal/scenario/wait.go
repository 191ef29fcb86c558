package scenario

import (
	"context"
	"errors"
	"time"
)

// waitLock waits until the lock key exists (or is gone), for at most limit.
func (e Env) waitLock(ctx context.Context, exists bool, limit time.Duration) error {
	return e.waitUntil(ctx, limit, func() (bool, error) {
		locked, err := e.locked(ctx)
		return locked == exists, err
	})
}

// locked reports whether the running cell's lock is taken (Stores.Held).
func (e Env) locked(ctx context.Context) (bool, error) {
	if e.Stores == nil {
		return false, errors.New("scenario: no stores to watch the " + e.lock + " lock in")
	}
	return e.Stores.Held(ctx, e.lock)
}

// waitUntil polls cond, an observable state, for at most limit.
func (e Env) waitUntil(ctx context.Context, limit time.Duration, cond func() (bool, error)) error {
	return waitEvery(ctx, limit, 2*time.Millisecond, cond)
}

// waitEvery is waitUntil asking cond every interval: what takes a
// sentinel's view seconds to change is asked less often.
func waitEvery(ctx context.Context, limit, interval time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("timed out after " + limit.String())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval): // polling the observable state
		}
	}
}
