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
	"errors"
	"fmt"
	"time"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/abandon"
	"github.com/locklab/locklab/internal/locks/fence"
	"github.com/redis/go-redis/v9"
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
}

// Locker is a v3, v4 or v5 lock, safe for concurrent use.
type Locker struct {
	rdb  Client
	opts Options
}

// New returns a Locker over rdb.
func New(rdb Client, opts Options) *Locker {
	if opts.Key == "" {
		opts.Key = "lock"
	}
	return &Locker{rdb: rdb, opts: opts}
}

// Key is the lock key.
func (l *Locker) Key() string { return l.opts.Key }

// TryAcquire makes one SET key owner NX [PX ttl] attempt: a lease, or
// lease.ErrTaken when another owner holds the lock.
func (l *Locker) TryAcquire(ctx context.Context, owner string) (lease.Lease, error) {
	ok, token, err := fence.SetNX(ctx, l.rdb, l.opts.Key, owner, l.opts.TTL, l.opts.Fence)
	switch {
	case err != nil:
		return nil, fmt.Errorf("setnx: acquire %s: %w", l.opts.Key, abandon.After(ctx, l.rdb, l.opts.Key, owner, err))
	case !ok:
		return nil, lease.ErrTaken
	}
	return lease.New(func(ctx context.Context) error { return l.release(ctx, owner) }, token, nil), nil
}

func (l *Locker) release(ctx context.Context, owner string) error {
	if l.opts.OwnerCheck {
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
	}
	n, err := l.rdb.Del(ctx, l.opts.Key).Result()
	if err != nil {
		return fmt.Errorf("setnx: release %s: %w", l.opts.Key, err)
	}
	if n == 0 {
		return fmt.Errorf("setnx: release %s: %w", l.opts.Key, lease.ErrNotHeld)
	}
	return nil
}
