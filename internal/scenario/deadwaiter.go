package scenario

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/locks/handoff"
	"github.com/locklab/locklab/internal/locks/retry"
)

// MovesOn is dead-waiter's good outcome: the queue went past the dead waiter
// after its claim deadline (a short wait, not a lease or its own deadline).
const MovesOn = "moves on after the claim deadline, no oversell"

// deadWaiter: H, on replica 2, holds the lock for half a lease. D, on
// replica 1, queues behind it (-wait handoff or notify, per request), then A,
// on replica 2, behind D. Replica 1 is killed (SIGKILL): D heads the queue
// and is dead. H releases; the release hands the lock to D (handoff) or
// wakes D (notify), who never takes it. The releasing replica checks at the
// claim deadline and serves A. Observed: how long after H's reply A's came,
// whether anything was oversold, and whether the lock is left held once A
// has released. Replica 1 is started again.
func deadWaiter(wait string) runFunc {
	return func(ctx context.Context, e Env, lock string, before int64) (observed, detail string, err error) {
		hooks := "wait=" + wait
		hold := e.TTL / 2 // inside every version's lease: the hold ends by a release, not an expiry
		queued := func(n int64) func() (bool, error) {
			return func() (bool, error) {
				got, err := e.queued(ctx, wait)
				return got >= n, err
			}
		}
		start := time.Now()
		h := e.sellAt(ctx, e.Replicas[1].URL, lock, hooks+"&hold="+hold.String())
		if err := e.waitLock(ctx, true, 5*time.Second); err != nil {
			return "", "", fmt.Errorf("the holder never took the lock: %w", err)
		}
		// notify keeps its holder in the queue: D is second there, first in
		// handoff's, whose holder is not queued.
		ahead := int64(0)
		if wait == "notify" {
			ahead = 1
		}
		d := e.sellAt(ctx, e.Replicas[0].URL, lock, hooks)
		if err := e.waitUntil(ctx, 5*time.Second, queued(ahead+1)); err != nil {
			return "", "", fmt.Errorf("the waiter to die never queued: %w", err)
		}
		a := e.sellAt(ctx, e.Replicas[1].URL, lock, hooks)
		if err := e.waitUntil(ctx, 5*time.Second, queued(ahead+2)); err != nil {
			return "", "", fmt.Errorf("the live waiter never queued: %w", err)
		}
		restart, err := e.Procs.Kill(e.Replicas[0].Name)
		if err != nil {
			return "", "", err
		}
		restart = restarted(e.Replicas[0].Name, restart)
		e.mark(e.Replicas[0].Name + " killed (its waiter heads the queue)")
		defer func() { err = errors.Join(err, restart(ctx)) }() // whatever happens, the replica comes back
		if setup := time.Since(start); setup >= hold {
			return "", "", fmt.Errorf("setting up took %s, past the holder's %s hold: the holder may have released before the waiter's replica was killed (a slower machine needs a longer -ttl)", setup.Round(time.Millisecond), hold)
		}
		<-d // its connection died with the replica
		rh := <-h
		released := time.Now()
		if rh.err != nil {
			return "", "", rh.err
		}
		ra := <-a
		gap := time.Since(released)
		if ra.err != nil {
			return "", "", ra.err
		}
		oversold, detail, err := e.oversold(ctx, before, rh, ra)
		if err != nil {
			return "", "", err
		}
		held, err := e.locked(ctx)
		if err != nil {
			return "", "", err
		}
		detail += fmt.Sprintf(", the live waiter answered %s after the holder (claim deadline %s)", gap.Round(time.Millisecond), handoff.DefaultClaim)
		if held {
			detail += ", the lock left held after every sale ended"
		}
		switch {
		case ra.code == api.CodeLockTimeout:
			return Deadlock, detail, nil
		case ra.status == http.StatusOK && oversold == 0 && !held && gap < handoff.DefaultClaim+e.TTL/2:
			return MovesOn, detail, nil
		case ra.status == http.StatusOK && oversold == 0 && !held:
			return fmt.Sprintf("moves on after %s", gap.Round(100*time.Millisecond)), detail, nil
		}
		return "unexpected reply", detail, nil
	}
}

// queued is how many waiters the running cell's lock has queued for wait.
func (e Env) queued(ctx context.Context, wait string) (int64, error) {
	key := handoff.For(e.LockKey).Queue
	if wait == "notify" {
		key, _ = retry.QueueKeys(e.LockKey)
	}
	return e.Redis.ZCard(ctx, key).Result()
}
