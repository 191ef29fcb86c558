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

	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/abandon"
	"github.com/locklab/locklab/internal/locks/fence"
	"github.com/redis/go-redis/v9"
)

var (
	//go:embed acquire.lua
	acquireSrc string
	//go:embed release.lua
	releaseSrc string

	acquireScript = redis.NewScript(acquireSrc)
	releaseScript = redis.NewScript(releaseSrc)
)

// Options configure a Locker. The zero value is a 20 s lease on the key "lock".
type Options struct {
	Key   string        // the lock key (a hash); default "lock"
	TTL   time.Duration // lease, sent to Redis in milliseconds; default 20 s (the tutorial's)
	Fence bool          // hand out a fencing token with each owner's first hold
}

// Locker is a v7 lock, safe for concurrent use.
type Locker struct {
	rdb  redis.Scripter
	opts Options
}

// New returns a Locker over rdb.
func New(rdb redis.Scripter, opts Options) *Locker {
	if opts.Key == "" {
		opts.Key = "lock"
	}
	if opts.TTL <= 0 {
		opts.TTL = 20 * time.Second
	}
	return &Locker{rdb: rdb, opts: opts}
}

// Key is the lock key.
func (l *Locker) Key() string { return l.opts.Key }

// TTL is the lease each acquisition sets.
func (l *Locker) TTL() time.Duration { return l.opts.TTL }

// TryAcquire makes one attempt to take a hold for owner: a lease, or
// lease.ErrTaken when another owner holds the lock. An owner that already
// holds it gets another hold at once (with the same fencing token).
func (l *Locker) TryAcquire(ctx context.Context, owner string) (lease.Lease, error) {
	flag := "0"
	if l.opts.Fence {
		flag = "1"
	}
	n, err := acquireScript.Run(ctx, l.rdb, []string{l.opts.Key, fence.CounterKey(l.opts.Key)},
		owner, l.opts.TTL.Milliseconds(), flag).Int64()
	switch {
	case err != nil:
		return nil, fmt.Errorf("reentrant: acquire %s: %w", l.opts.Key, abandon.After(ctx, l.rdb, l.opts.Key, owner, err))
	case n == 0:
		return nil, lease.ErrTaken
	}
	var token int64
	if l.opts.Fence {
		token = n
	}
	return lease.New(func(ctx context.Context) error { return l.release(ctx, owner) }, token, nil), nil
}

func (l *Locker) release(ctx context.Context, owner string) error {
	n, err := releaseScript.Run(ctx, l.rdb, []string{l.opts.Key}, owner).Int()
	if err != nil {
		return fmt.Errorf("reentrant: release %s: %w", l.opts.Key, err)
	}
	if n < 0 {
		return fmt.Errorf("reentrant: release %s: %w", l.opts.Key, lease.ErrNotHeld)
	}
	return nil
}
