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
	"github.com/locklab/locklab/internal/locks/fence"
	"github.com/locklab/locklab/internal/locks/retry"
	"github.com/redis/go-redis/v9"
)

// ErrNotHeld means the release found the lock gone or held by another owner:
// the lease expired while its holder was still working.
var ErrNotHeld = errors.New("setnx: lock not held at release")

// Client is the part of a Redis client this package uses.
type Client interface {
	redis.Scripter // fenced acquisition only
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
	Get(ctx context.Context, key string) *redis.StringCmd
	Del(ctx context.Context, keys ...string) *redis.IntCmd
}

// Options select the version.
type Options struct {
	Key   string        // the lock key (the tutorial's inventoryRedisLock)
	TTL   time.Duration // lease; 0 means no expiry (v3). go-redis sends it as EX or PX, never as nanoseconds.
	Retry time.Duration // wait between attempts while the lock is taken
	// OwnerCheck makes release GET the key and DEL it only when it still
	// holds the owner's value (v5). Without it release is a blind DEL (v3, v4).
	OwnerCheck bool
	// Notify, when set, replaces polling (-wait notify): waiters queue and
	// are woken one at a time as the lock is released (retry.Notifier).
	Notify *retry.Notifier
}

// Locker is a v3, v4 or v5 lock, safe for concurrent use.
type Locker struct {
	rdb  Client
	opts Options
}

// New returns a Locker over rdb.
func New(rdb Client, opts Options) *Locker {
	return &Locker{rdb: rdb, opts: opts}
}

// Acquire polls SET key owner NX [PX ttl] every Retry until it succeeds or ctx
// ends.
func (l *Locker) Acquire(ctx context.Context, owner string) (func(context.Context) error, error) {
	return l.acquire(ctx, owner, func(ctx context.Context) (bool, error) {
		return l.rdb.SetNX(ctx, l.opts.Key, owner, l.opts.TTL).Result()
	})
}

// AcquireFenced is Acquire with a fencing token, issued in the same atomic
// step as the lock (package fence). The release is unchanged.
func (l *Locker) AcquireFenced(ctx context.Context, owner string) (func(context.Context) error, int64, error) {
	var token int64
	release, err := l.acquire(ctx, owner, func(ctx context.Context) (bool, error) {
		var err error
		token, err = fence.TrySetNX(ctx, l.rdb, l.opts.Key, owner, l.opts.TTL)
		return token > 0, err
	})
	return release, token, err
}

func (l *Locker) acquire(ctx context.Context, owner string, try retry.Try) (func(context.Context) error, error) {
	if err := retry.Wait(ctx, l.opts.Notify, l.opts.Retry, owner, try); err != nil {
		return nil, fmt.Errorf("setnx: acquire %s: %w", l.opts.Key, err)
	}
	return func(ctx context.Context) error {
		defer retry.Done(ctx, l.opts.Notify, owner)
		return l.release(ctx, owner)
	}, nil
}

func (l *Locker) release(ctx context.Context, owner string) error {
	if l.opts.OwnerCheck {
		v, err := l.rdb.Get(ctx, l.opts.Key).Result()
		if errors.Is(err, redis.Nil) || (err == nil && v != owner) {
			return ErrNotHeld
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
		return ErrNotHeld
	}
	return nil
}
