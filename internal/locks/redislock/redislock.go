// Package redislock is github.com/bsm/redislock, one of the Go libraries
// people reach for instead of writing the lock (issue 33), used as its README
// shows it: Obtain with a retry strategy, Release when done, Refresh never
// called. It is here to be judged like the tutorial's versions, not
// rewritten: what it does under the same load and faults is the finding.
//
// What it is: v6 in a library. SET NX PX with a random token to take the
// lock, a Lua compare-and-delete to release it, and a waiter that polls (its
// LinearBackoff, here at the same mean interval as the tutorial's -retry).
// What it does not give: a fencing token (the version served here, v0.9.4,
// has none: its Token is the random owner value, not a number that grows),
// a lease that knows it is lost (no watchdog unless the caller refreshes), or
// reentrancy.
package redislock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/bsm/redislock"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/lease"
)

// Options configure a Locker. The zero value is a 20 s lease on "lock",
// polled every 20 ms.
type Options struct {
	Key   string        // the lock key
	TTL   time.Duration // the lease; default 20 s
	Retry time.Duration // the wait between attempts (LinearBackoff); default 20 ms
}

// Locker is a bsm/redislock lock, safe for concurrent use.
type Locker struct {
	c    *redislock.Client
	opts Options
}

// New returns a Locker over rdb.
func New(rdb redislock.RedisClient, opts Options) *Locker {
	if opts.Key == "" {
		opts.Key = "lock"
	}
	if opts.TTL <= 0 {
		opts.TTL = 20 * time.Second
	}
	if opts.Retry <= 0 {
		opts.Retry = 20 * time.Millisecond
	}
	return &Locker{c: redislock.New(rdb), opts: opts}
}

// Acquire waits for the lock the library's way (it tries, then waits Retry,
// until ctx ends) and returns its lease: never known lost, with no token.
// owner goes in the lock's metadata; the library's own random token is what
// its release checks.
func (l *Locker) Acquire(ctx context.Context, owner string) (lease.Lease, error) {
	// lesson:begin redislock
	retry := redislock.LinearBackoff(l.opts.Retry)
	// lesson:end
	if chaos.From(ctx).Off.Wake { // switched off only by make mutations
		retry = noPoll
	}
	// lesson:begin redislock
	lock, err := l.c.Obtain(ctx, l.opts.Key, l.opts.TTL, &redislock.Options{RetryStrategy: retry, Metadata: owner})
	// lesson:end
	switch {
	case err == nil:
	case notObtained(err) && ctx.Err() != nil: // taken until the caller's deadline, or it went away
		return nil, fmt.Errorf("lock not obtained (redislock %s): %w", l.opts.Key, context.Cause(ctx))
	case notObtained(err):
		// Given no deadline, the library waits one TTL at most, then gives up.
		return nil, fmt.Errorf("lock not obtained (redislock %s): %w", l.opts.Key, err)
	default: // a Redis error: the node is down or refuses
		return nil, fmt.Errorf("redislock: obtain %s: %w", l.opts.Key, err)
	}
	release := func(ctx context.Context) error {
		// lesson:begin redislock
		err := lock.Release(ctx)
		// lesson:end
		if errors.Is(err, redislock.ErrLockNotHeld) {
			return fmt.Errorf("redislock: release %s: %w", l.opts.Key, lease.ErrNotHeld)
		}
		return err
	}
	return lease.New(release, 0, nil), nil
}

// noPoll is the retry strategy of a waiter whose request switched its
// wake-up off (chaos.Off.Wake, make mutations' lost-wakeup). The library
// has no wake-up: a waiter learns the lock is free only at its next poll,
// so its poll is what lost-wakeup proves, and this strategy loses every
// poll after the first. It waits longer than any acquire deadline (not
// NoRetry's 0, which gives up at once: a refusal, not a waiter left
// waiting), so the waiter waits, with the lock free, until its deadline.
var noPoll = redislock.LinearBackoff(24 * time.Hour)

// notObtained reports whether Obtain's error says that the lock stayed
// taken: its retries ran out (ErrNotObtained), or its wait ended with its
// context (it returns the context's error). Anything else is Redis failing,
// even when it comes after the context ended: the library runs each attempt
// on the caller's context, and a node that does not answer fails it at the
// client's read timeout, which may be past the acquire deadline. That is an
// outage (503 unavailable), not a lock that others held until the deadline.
// A network error that wraps the context's (a dial cut by the deadline) is
// the network's: an *net.OpError or a lookup's *net.DNSError, as the sale
// tells them (a net.Error would not do: context.DeadlineExceeded is one, and
// a waiter whose deadline came between two polls was said to be Redis
// failing).
func notObtained(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.Is(err, redislock.ErrNotObtained) ||
		(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) && !errors.As(err, &op) && !errors.As(err, &dns)
}
