// Package lua is the tutorial's v6: SET NX with an expiry to acquire, and a Lua
// compare-and-delete to release, so checking the owner and deleting the key
// are one atomic step in Redis (v5 did them as two commands).
//
// What it still gets wrong: it is not reentrant. A caller that already holds
// the lock and asks again waits on itself until its deadline. And like v4 and
// v5, work that outlasts the TTL loses the lock while still running.
package lua

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/handoff"
	setnx "github.com/locklab/locklab/internal/locks/v3_setnx"
	"github.com/redis/go-redis/v9"
)

//go:embed release.lua
var releaseSrc string

var releaseScript = redis.NewScript(releaseSrc)

// Options configure a Locker. The zero value is a 20 s lease on the key "lock".
type Options struct {
	Key   string        // the lock key; default "lock"
	TTL   time.Duration // lease, sent in milliseconds; default 20 s (the tutorial's)
	Fence bool          // hand out a fencing token with each acquisition
	// Handoff makes release hand the lock to the first queued waiter (-wait
	// handoff), with the owner checked in the same script, as v6 checks it.
	Handoff bool
	// Claim is how long a waiter handed the lock has to claim it; default
	// handoff.DefaultClaim.
	Claim time.Duration
}

// Locker is a v6 lock, safe for concurrent use: v4's acquire (package setnx)
// with its own release.
type Locker struct {
	v4      *setnx.Locker
	rdb     redis.Scripter
	key     string
	handoff bool
}

// New returns a Locker over rdb.
func New(rdb setnx.Client, opts Options) *Locker {
	if opts.TTL <= 0 {
		opts.TTL = 20 * time.Second
	}
	v4 := setnx.New(rdb, setnx.Options{Key: opts.Key, TTL: opts.TTL, Fence: opts.Fence, Claim: opts.Claim})
	return &Locker{v4: v4, rdb: rdb, key: v4.Key(), handoff: opts.Handoff}
}

// TryAcquire makes v4's one SET key owner NX PX ttl attempt: a lease that
// releases with the Lua compare-and-delete, or lease.ErrTaken when another
// owner (or this one: v6 is not reentrant) holds the lock.
func (l *Locker) TryAcquire(ctx context.Context, owner string) (lease.Lease, error) {
	held, err := l.v4.TryAcquire(ctx, owner)
	if err != nil {
		return nil, err
	}
	return l.own(held, owner), nil
}

// own gives a lease of v4's acquire v6's release.
func (l *Locker) own(held lease.Lease, owner string) lease.Lease {
	return lease.WithRelease(held, func(ctx context.Context) error { return l.release(ctx, owner) })
}

// TryOrQueue is v4's attempt that queues when the lock is taken (-wait
// handoff): a lease that releases as v6 does, or lease.ErrTaken.
func (l *Locker) TryOrQueue(ctx context.Context, owner string, w handoff.Waiter) (lease.Lease, error) {
	held, err := l.v4.TryOrQueue(ctx, owner, w)
	if err != nil {
		return nil, err
	}
	return l.own(held, owner), nil
}

// Granted claims the hold a release handed owner, with its token (v4's
// claim), releasing as v6 does.
func (l *Locker) Granted(ctx context.Context, owner string, token int64) (lease.Lease, error) {
	held, err := l.v4.Granted(ctx, owner, token)
	if err != nil {
		return nil, err
	}
	return l.own(held, owner), nil
}

// Leave takes owner out of the queue; if a release handed it the lock
// meanwhile, it passes the lock on.
func (l *Locker) Leave(ctx context.Context, owner string) error {
	return handoff.Leave(ctx, l.rdb, handoff.For(l.key), owner, func(ctx context.Context) error { return l.release(ctx, owner) })
}

func (l *Locker) release(ctx context.Context, owner string) error {
	// The release-race scenario pauses here, as it pauses v5 between its GET
	// and DEL; the script below checks the owner in the same step as it deletes.
	chaos.BeforeDelete(ctx)
	if l.handoff && !chaos.From(ctx).Off.Wake { // switched off only by make mutations
		return l.v4.HandOver(ctx, owner, true)
	}
	// lesson:begin v6
	n, err := releaseScript.Run(ctx, l.rdb, []string{l.key}, owner).Int()
	if err != nil {
		return fmt.Errorf("lua: release %s: %w", l.key, err)
	}
	if n == 0 {
		return fmt.Errorf("lua: release %s: %w", l.key, lease.ErrNotHeld)
	}
	return nil
	// lesson:end
}
