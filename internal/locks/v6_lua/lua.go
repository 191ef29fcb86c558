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
	"errors"
	"fmt"
	"time"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/locks/fence"
	"github.com/locklab/locklab/internal/locks/retry"
	"github.com/redis/go-redis/v9"
)

// ErrNotHeld means the lease expired before release: another owner may have
// held the lock while this one was still working.
var ErrNotHeld = errors.New("lua: lock not held at release")

//go:embed release.lua
var releaseSrc string

var releaseScript = redis.NewScript(releaseSrc)

// Client is the part of a Redis client this package uses.
type Client interface {
	redis.Scripter
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
}

// Locker is a v6 lock, safe for concurrent use.
type Locker struct {
	rdb   Client
	key   string
	ttl   time.Duration
	retry time.Duration
	// notify, when set, replaces polling (-wait notify): waiters queue and
	// are woken one at a time as the lock is released.
	notify *retry.Notifier
}

// New returns a Locker on key with lease ttl, polling every retry while taken.
func New(rdb Client, key string, ttl, retry time.Duration) *Locker {
	return &Locker{rdb: rdb, key: key, ttl: ttl, retry: retry}
}

// WithNotify returns a copy of l that waits for published releases instead of
// polling, and publishes its own (package retry's Notifier).
func (l *Locker) WithNotify(n *retry.Notifier) *Locker {
	c := *l
	c.notify = n
	return &c
}

// Acquire polls SET key owner NX PX ttl until it succeeds or ctx ends.
func (l *Locker) Acquire(ctx context.Context, owner string) (func(context.Context) error, error) {
	return l.acquire(ctx, owner, func(ctx context.Context) (bool, error) {
		return l.rdb.SetNX(ctx, l.key, owner, l.ttl).Result()
	})
}

// AcquireFenced is Acquire with a fencing token, issued in the same atomic
// step as the lock (package fence).
func (l *Locker) AcquireFenced(ctx context.Context, owner string) (func(context.Context) error, int64, error) {
	var token int64
	release, err := l.acquire(ctx, owner, func(ctx context.Context) (bool, error) {
		var err error
		token, err = fence.TrySetNX(ctx, l.rdb, l.key, owner, l.ttl)
		return token > 0, err
	})
	return release, token, err
}

func (l *Locker) acquire(ctx context.Context, owner string, try retry.Try) (func(context.Context) error, error) {
	if err := retry.Wait(ctx, l.notify, l.retry, owner, try); err != nil {
		return nil, fmt.Errorf("lua: acquire %s: %w", l.key, err)
	}
	return func(ctx context.Context) error {
		defer retry.Done(ctx, l.notify, owner)
		return l.release(ctx, owner)
	}, nil
}

func (l *Locker) release(ctx context.Context, owner string) error {
	// The release-race scenario pauses here, as it pauses v5 between its GET
	// and DEL; the script below checks the owner in the same step as it deletes.
	chaos.BeforeDelete(ctx)
	n, err := releaseScript.Run(ctx, l.rdb, []string{l.key}, owner).Int()
	if err != nil {
		return fmt.Errorf("lua: release %s: %w", l.key, err)
	}
	if n == 0 {
		return ErrNotHeld
	}
	return nil
}
