package scenario

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/reason"
	"github.com/redis/go-redis/v9"
)

// dead-waiter's outcomes.
const (
	// MovesOn is the good one: the releasing replica's check at the dead
	// waiter's claim deadline passed the lock on (its passes counter rose),
	// and the live waiter was served, with nothing oversold.
	MovesOn = "moves on after the claim deadline, no oversell"
	// OwnCheck is the queue moving past the dead waiter with nothing passed
	// on by the releaser: the live waiter took the lock at its own periodic
	// check (every second), as every waiter behind a dead one would.
	OwnCheck = "moves on only by the waiters' own check, nothing passed on"
)

// deadWaiter: H, on replica 2, holds the lock for half a lease. D, on
// replica 1, queues behind it (-wait handoff or notify, per request), then A,
// on replica 2, behind D. Replica 1 is killed (SIGKILL): D heads the queue
// and is dead. H releases; the release hands the lock to D (handoff) or
// wakes D (notify), who never takes it. The releasing replica checks at the
// claim deadline and serves A. Observed: whether that check passed the lock
// on (the lock's passes counter in Redis, which only the releasing side
// raises: A's own check every second would serve A too, only later, and a
// time bound cannot tell the two apart on a 1 s lease), how long after H's
// reply A's came, whether anything was oversold, and whether the lock is
// left held once A has released. Replica 1 is started again.
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
		passedBefore, err := e.passed(ctx, wait)
		if err != nil {
			return "", "", err
		}
		restart, err := e.Procs.Kill(e.Replicas[0].Name)
		if err != nil {
			return "", "", err
		}
		restart = restarted(e.Replicas[0].Name, restart)
		e.mark(reason.New("killedWaiter", "{node} killed (its waiter heads the queue)", "node", e.Replicas[0].Name))
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
		passedAfter, err := e.passed(ctx, wait)
		if err != nil {
			return "", "", err
		}
		passed := passedAfter - passedBefore
		detail += fmt.Sprintf(", the live waiter answered %s after the holder (claim deadline %s), %d dead waiter(s) passed over by the releasing replica", gap.Round(time.Millisecond), e.Claim, passed)
		if held {
			detail += ", the lock left held after every sale ended"
		}
		switch {
		case ra.code == api.CodeLockTimeout:
			return Deadlock, detail, nil
		case ra.status == http.StatusOK && oversold == 0 && !held && passed > 0:
			return MovesOn, detail, nil
		case ra.status == http.StatusOK && oversold == 0 && !held:
			return OwnCheck, detail, nil
		}
		return "unexpected reply", detail, nil
	}
}

// passed is the running cell's lock's count of dead waiters the releasing
// side passed over for wait (Stores.WaitKeys).
func (e Env) passed(ctx context.Context, wait string) (int64, error) {
	_, key := e.Stores.WaitKeys(wait)
	n, err := e.Redis.Get(ctx, key).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

// queued is how many waiters the running cell's lock has queued for wait.
func (e Env) queued(ctx context.Context, wait string) (int64, error) {
	key, _ := e.Stores.WaitKeys(wait)
	return e.Redis.ZCard(ctx, key).Result()
}
