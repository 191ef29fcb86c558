// Package setnx is the tutorial's v3, v4 and v5: a lock that is one Redis
// string key, taken with SET NX and released with DEL.
//
//   - v3 (TTL 0): SETNX with no expiry. Exclusive across replicas, but a holder
//     that dies never releases: every later sale waits forever (deadlock).
//   - v4 (TTL > 0): SET NX with an expiry in the same command, so a crash only
//     blocks others for the TTL. Release is a blind DEL: a holder whose work
//     outlasted the TTL deletes the lock its successor now holds.
//   - v5 (OwnerCheck): release reads the key and deletes it only if it still
//     holds this owner's value. GET and DEL are two commands, and the lock can
//     change hands between them; v6 closes that gap with one Lua script.
package setnx

import (
	"context"
	_ "embed"
	"errors"
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
	//go:embed try.lua
	trySrc    string
	tryScript = handoff.Script(trySrc)
	//go:embed handover.lua
	handoverSrc    string
	handoverScript = handoff.Script(handoverSrc)
)

// Client is the part of a Redis client this package uses.
type Client interface {
	fence.Client
	Get(ctx context.Context, key string) *redis.StringCmd
	Del(ctx context.Context, keys ...string) *redis.IntCmd
}

// Options select the version. The zero value is v3 on the key "lock".
type Options struct {
	Key string        // the lock key; default "lock"
	TTL time.Duration // lease; 0 means no expiry (v3). go-redis sends it as EX or PX, never as nanoseconds.
	// OwnerCheck makes release GET the key and DEL it only when it still
	// holds the owner's value (v5). Without it release is a blind DEL (v3, v4).
	OwnerCheck bool
	// Fence hands out a fencing token with each acquisition, issued in the
	// same atomic step as the lock (package fence).
	Fence bool
	// Handoff makes release hand the lock to the first waiter queued by
	// TryOrQueue (-wait handoff, package handoff) instead of deleting it.
	// The owner check (v5), or its absence (v3, v4), stays as it was.
	Handoff bool
	// Claim is how long a waiter handed the lock has to claim it (-wait
	// handoff); default handoff.DefaultClaim.
	Claim time.Duration
}

// Locker is a v3, v4 or v5 lock, safe for concurrent use.
type Locker struct {
	rdb   Client
	opts  Options
	keys  handoff.Keys
	giver *handoff.Giver
}

// New returns a Locker over rdb.
func New(rdb Client, opts Options) *Locker {
	if opts.Key == "" {
		opts.Key = "lock"
	}
	keys := handoff.For(opts.Key)
	return &Locker{rdb: rdb, opts: opts, keys: keys,
		giver: handoff.NewGiver(rdb, keys, "string", opts.Claim)}
}

// Key is the lock key.
func (l *Locker) Key() string { return l.opts.Key }

// TryAcquire makes one SET key owner NX [PX ttl] attempt: a lease, or
// lease.ErrTaken when another owner holds the lock.
func (l *Locker) TryAcquire(ctx context.Context, owner string) (lease.Lease, error) {
	var ok bool
	var token int64
	var err error
	switch {
	case l.opts.Fence: // the lock and its token in one step (package fence)
		ok, token, err = fence.SetNX(ctx, l.rdb, l.opts.Key, owner, l.opts.TTL, true)
	case l.opts.TTL == 0:
		// lesson:begin v3
		// SETNX key owner: no expiry, so a holder that dies holds it forever.
		ok, err = l.rdb.SetNX(ctx, l.opts.Key, owner, 0).Result()
		// lesson:end
	default:
		// lesson:begin v4 v5 v6
		// SET key owner PX ttl NX: the lock and its expiry in one command.
		ok, err = l.rdb.SetNX(ctx, l.opts.Key, owner, l.opts.TTL).Result()
		// lesson:end
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("setnx: acquire %s: %w", l.opts.Key, abandon.After(ctx, l.rdb, l.opts.Key, owner, err))
	case !ok:
		return nil, lease.ErrTaken
	}
	return l.lease(owner, token), nil
}

func (l *Locker) lease(owner string, token int64) lease.Lease {
	return lease.New(func(ctx context.Context) error { return l.release(ctx, owner) }, token, nil)
}

// TryOrQueue makes one attempt, as TryAcquire does, and when the lock is
// taken queues owner as w says in the same step, and answers lease.ErrTaken
// (-wait handoff). When w.Queued, a release may have handed owner the lock,
// and it is told so.
func (l *Locker) TryOrQueue(ctx context.Context, owner string, w handoff.Waiter) (lease.Lease, error) {
	n, err := tryScript.Run(ctx, l.rdb, l.keys.List(), owner, fence.PX(l.opts.TTL), handoff.Flag(l.opts.Fence),
		fence.PX(w.Wait), handoff.Flag(w.Queued), w.Channel).Int64()
	switch {
	case err != nil:
		return nil, fmt.Errorf("setnx: acquire or queue for %s: %w", l.opts.Key, err)
	case n == 0:
		return nil, lease.ErrTaken
	case !l.opts.Fence:
		n = 0
	}
	return l.lease(owner, n), nil
}

// Granted claims the hold a release handed owner, with its token: its lease
// (none for v3) starts now. lease.ErrTaken when the grant was taken back
// first (not claimed in time).
func (l *Locker) Granted(ctx context.Context, owner string, token int64) (lease.Lease, error) {
	if err := handoff.Claim(ctx, l.rdb, l.keys, owner, l.opts.TTL, token); err != nil {
		return nil, err
	}
	return l.lease(owner, token), nil
}

// Leave takes owner out of the queue; if a release handed it the lock
// meanwhile, it passes the lock on.
func (l *Locker) Leave(ctx context.Context, owner string) error {
	return handoff.Leave(ctx, l.rdb, l.keys, owner, func(ctx context.Context) error { return l.release(ctx, owner) })
}

// HandOver releases by handing the lock to the first waiter still queued, or
// freeing it when none waits. checked compares the owner in the same step
// (v6); otherwise whatever holds the lock is handed over, as v3 to v5's DEL
// deletes it. It returns lease.ErrNotHeld when the lock was gone or, checked,
// another owner's. A grant is watched until claimed (handoff.Giver.Watch).
func (l *Locker) HandOver(ctx context.Context, owner string, checked bool) error {
	reply, err := handoverScript.Run(ctx, l.rdb, l.keys.List(), owner, handoff.Flag(checked), l.giver.ClaimMS()).Result()
	var n int64
	if err == nil {
		n, err = l.giver.Released(ctx, reply)
	}
	if err != nil {
		return fmt.Errorf("setnx: hand over %s: %w", l.opts.Key, err)
	}
	if n == 0 {
		return fmt.Errorf("setnx: hand over %s: %w", l.opts.Key, lease.ErrNotHeld)
	}
	return nil
}

func (l *Locker) release(ctx context.Context, owner string) error {
	if l.opts.OwnerCheck {
		// lesson:begin v5
		v, err := l.rdb.Get(ctx, l.opts.Key).Result()
		if errors.Is(err, redis.Nil) || (err == nil && v != owner) {
			return fmt.Errorf("setnx: release %s: %w", l.opts.Key, lease.ErrNotHeld)
		}
		if err != nil {
			return fmt.Errorf("setnx: release %s: %w", l.opts.Key, err)
		}
		// The window: between the GET above and the DEL below the lease can
		// expire and another owner take the lock; this DEL then removes theirs.
		// (The release-race scenario holds it open on purpose.)
		chaos.BeforeDelete(ctx)
		// lesson:end
	}
	if l.opts.Handoff && !chaos.From(ctx).Off.Wake { // switched off only by make mutations
		return l.HandOver(ctx, owner, false)
	}
	// lesson:begin v3 v4 v5
	n, err := l.rdb.Del(ctx, l.opts.Key).Result()
	if err != nil {
		return fmt.Errorf("setnx: release %s: %w", l.opts.Key, err)
	}
	if n == 0 {
		return fmt.Errorf("setnx: release %s: %w", l.opts.Key, lease.ErrNotHeld)
	}
	return nil
	// lesson:end
}
