// Package reentrant is the tutorial's v7: a lock that the same owner may take
// again while holding it. The lock is a Redis hash, field = owner, value = the
// number of nested holds; both acquire and release are Lua scripts.
//
// What it still gets wrong: the lease is fixed. Work that outlasts the TTL
// loses the lock while still running, and another owner walks in (v8 adds the
// watchdog that renews it).
package reentrant

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/abandon"
	"github.com/locklab/locklab/internal/locks/fence"
	"github.com/locklab/locklab/internal/locks/handoff"
	"github.com/redis/go-redis/v9"
)

var (
	//go:embed acquire.lua
	acquireSrc string
	//go:embed release.lua
	releaseSrc string

	acquireScript = redis.NewScript(acquireSrc)
	releaseScript = redis.NewScript(releaseSrc)

	//go:embed try.lua
	trySrc    string
	tryScript = handoff.Script(trySrc, handoff.Plain{Name: "v7_acquire", Src: acquireSrc})
	//go:embed handover.lua
	handoverSrc    string
	handoverScript = handoff.Script(handoverSrc, handoff.Plain{Name: "v7_release", Src: releaseSrc})
)

// Options configure a Locker. The zero value is a 20 s lease on the key "lock".
type Options struct {
	Key   string        // the lock key (a hash); default "lock"
	TTL   time.Duration // lease, sent to Redis in milliseconds; default 20 s (the tutorial's)
	Fence bool          // hand out a fencing token with each owner's first hold
	// Handoff makes the outermost release hand the lock to the first waiter
	// queued by TryOrQueue (-wait handoff, package handoff).
	Handoff bool
	// Claim is how long a waiter handed the lock has to claim it; default
	// handoff.DefaultClaim.
	Claim time.Duration
}

// Locker is a v7 lock, safe for concurrent use.
type Locker struct {
	rdb   redis.Scripter
	opts  Options
	keys  handoff.Keys
	giver *handoff.Giver
}

// New returns a Locker over rdb.
func New(rdb redis.Scripter, opts Options) *Locker {
	if opts.Key == "" {
		opts.Key = "lock"
	}
	if opts.TTL <= 0 {
		opts.TTL = 20 * time.Second
	}
	keys := handoff.For(opts.Key)
	return &Locker{rdb: rdb, opts: opts, keys: keys,
		giver: handoff.NewGiver(rdb, keys, "hash", opts.Claim)}
}

// Key is the lock key.
func (l *Locker) Key() string { return l.opts.Key }

// TTL is the lease each acquisition sets.
func (l *Locker) TTL() time.Duration { return l.opts.TTL }

// TryAcquire makes one attempt to take a hold for owner: a lease, or
// lease.ErrTaken when another owner holds the lock. An owner that already
// holds it gets another hold at once (with the same fencing token).
func (l *Locker) TryAcquire(ctx context.Context, owner string) (lease.Lease, error) {
	// lesson:begin v7 v8
	n, err := acquireScript.Run(ctx, l.rdb, []string{l.opts.Key, fence.CounterKey(l.opts.Key)},
		owner, l.opts.TTL.Milliseconds(), handoff.Flag(l.opts.Fence)).Int64()
	// lesson:end
	if err != nil {
		err = abandon.After(ctx, l.rdb, l.opts.Key, owner, err)
	}
	return l.held(ctx, owner, "acquire", n, err)
}

// held turns a script's reply, a token (1 when unfenced) or 0 when the lock
// is taken, into a lease.
func (l *Locker) held(ctx context.Context, owner, what string, n int64, err error) (lease.Lease, error) {
	switch {
	case err != nil:
		return nil, fmt.Errorf("reentrant: %s %s: %w", what, l.opts.Key, err)
	case n == 0:
		return nil, lease.ErrTaken
	case !l.opts.Fence:
		n = 0
	}
	return l.hold(owner, n), nil
}

// TryOrQueue makes one attempt, as TryAcquire does, and when another owner
// holds the lock queues owner as w says in the same step, and answers
// lease.ErrTaken (-wait handoff). When w.Queued, a release may have handed
// owner the lock, and it is told so.
func (l *Locker) TryOrQueue(ctx context.Context, owner string, w handoff.Waiter) (lease.Lease, error) {
	n, err := tryScript.Run(ctx, l.rdb, l.keys.List(), owner, l.opts.TTL.Milliseconds(), handoff.Flag(l.opts.Fence),
		fence.PX(w.Wait), handoff.Flag(w.Queued), w.Channel).Int64()
	return l.held(ctx, owner, "acquire or queue for", n, err)
}

// Granted claims the hold a release handed owner, with its token: its lease
// starts now. lease.ErrTaken when the grant was taken back first (not
// claimed in time).
func (l *Locker) Granted(ctx context.Context, owner string, token int64) (lease.Lease, error) {
	if err := handoff.Claim(ctx, l.rdb, l.keys, owner, l.opts.TTL, token); err != nil {
		return nil, err
	}
	return l.hold(owner, token), nil
}

// hold is the lease of a hold of owner's with its token.
func (l *Locker) hold(owner string, token int64) lease.Lease {
	return lease.New(func(ctx context.Context) error { return l.release(ctx, owner) }, token, nil)
}

// Leave takes owner out of the queue; if a release handed it the lock
// meanwhile, it passes the lock on.
func (l *Locker) Leave(ctx context.Context, owner string) error {
	return handoff.Leave(ctx, l.rdb, l.keys, owner, func(ctx context.Context) error { return l.release(ctx, owner) })
}

func (l *Locker) release(ctx context.Context, owner string) error {
	var n int64
	var err error
	if l.opts.Handoff && !chaos.From(ctx).Off.Wake { // switched off only by make mutations
		var reply any
		reply, err = handoverScript.Run(ctx, l.rdb, l.keys.List(), owner, l.giver.ClaimMS()).Result()
		if err == nil {
			n, err = l.giver.Released(ctx, reply)
		}
	} else {
		// lesson:begin v7 v8
		n, err = releaseScript.Run(ctx, l.rdb, []string{l.opts.Key}, owner).Int64()
		// lesson:end
	}
	// lesson:begin v7 v8
	if err != nil {
		return fmt.Errorf("reentrant: release %s: %w", l.opts.Key, err)
	}
	if n < 0 {
		return fmt.Errorf("reentrant: release %s: %w", l.opts.Key, lease.ErrNotHeld)
	}
	return nil
	// lesson:end
}
