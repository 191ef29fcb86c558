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
	"errors"
	"fmt"
	"time"

	"github.com/locklab/locklab/internal/locks/fence"
	"github.com/locklab/locklab/internal/locks/retry"
	"github.com/redis/go-redis/v9"
)

// ErrNotHeld means the owner held nothing at release: the lease expired while
// it was working.
var ErrNotHeld = errors.New("reentrant: lock not held at release")

var (
	//go:embed acquire.lua
	acquireSrc string
	//go:embed release.lua
	releaseSrc string

	acquireScript = redis.NewScript(acquireSrc)
	releaseScript = redis.NewScript(releaseSrc)
)

// Options configure a Locker.
type Options struct {
	Key   string        // the lock key (a hash)
	TTL   time.Duration // lease, sent to Redis in milliseconds
	Retry time.Duration // wait between attempts while another owner holds it
	// Notify, when set, replaces polling (-wait notify): waiters queue and
	// are woken one at a time as the lock is freed.
	Notify *retry.Notifier
}

// Locker is a v7 lock, safe for concurrent use.
type Locker struct {
	rdb  redis.Scripter
	opts Options
}

// New returns a Locker over rdb.
func New(rdb redis.Scripter, opts Options) *Locker {
	return &Locker{rdb: rdb, opts: opts}
}

// Key is the lock key.
func (l *Locker) Key() string { return l.opts.Key }

// TTL is the lease each acquisition sets.
func (l *Locker) TTL() time.Duration { return l.opts.TTL }

// Acquire takes one hold for owner, waiting while another owner holds the lock.
// An owner that already holds it gets another hold at once.
func (l *Locker) Acquire(ctx context.Context, owner string) (func(context.Context) error, error) {
	release, _, err := l.acquire(ctx, owner, false)
	return release, err
}

// AcquireFenced is Acquire with a fencing token: a new one, issued in the same
// atomic step, on the owner's first hold; the same one on a nested hold.
func (l *Locker) AcquireFenced(ctx context.Context, owner string) (func(context.Context) error, int64, error) {
	return l.acquire(ctx, owner, true)
}

func (l *Locker) acquire(ctx context.Context, owner string, fenced bool) (func(context.Context) error, int64, error) {
	flag := "0"
	if fenced {
		flag = "1"
	}
	var token int64
	err := retry.Wait(ctx, l.opts.Notify, l.opts.Retry, owner, func(ctx context.Context) (bool, error) {
		var err error
		token, err = acquireScript.Run(ctx, l.rdb, []string{l.opts.Key, fence.CounterKey(l.opts.Key)},
			owner, l.opts.TTL.Milliseconds(), flag).Int64()
		return token > 0, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("reentrant: acquire %s: %w", l.opts.Key, err)
	}
	return func(ctx context.Context) error {
		defer retry.Done(ctx, l.opts.Notify, owner)
		return l.release(ctx, owner)
	}, token, nil
}

func (l *Locker) release(ctx context.Context, owner string) error {
	n, err := releaseScript.Run(ctx, l.rdb, []string{l.opts.Key}, owner).Int()
	if err != nil {
		return fmt.Errorf("reentrant: release %s: %w", l.opts.Key, err)
	}
	if n < 0 {
		return ErrNotHeld
	}
	return nil
}
