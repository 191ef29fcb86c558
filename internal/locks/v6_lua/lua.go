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
	"github.com/locklab/locklab/internal/locks/fence"
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
}

// Locker is a v6 lock, safe for concurrent use.
type Locker struct {
	rdb  fence.Client
	opts Options
}

// New returns a Locker over rdb.
func New(rdb fence.Client, opts Options) *Locker {
	if opts.Key == "" {
		opts.Key = "lock"
	}
	if opts.TTL <= 0 {
		opts.TTL = 20 * time.Second
	}
	return &Locker{rdb: rdb, opts: opts}
}

// TryAcquire makes one SET key owner NX PX ttl attempt: a lease, or
// lease.ErrTaken when another owner (or this one: v6 is not reentrant) holds it.
func (l *Locker) TryAcquire(ctx context.Context, owner string) (lease.Lease, error) {
	ok, token, err := fence.SetNX(ctx, l.rdb, l.opts.Key, owner, l.opts.TTL, l.opts.Fence)
	switch {
	case err != nil:
		return nil, fmt.Errorf("lua: acquire %s: %w", l.opts.Key, err)
	case !ok:
		return nil, lease.ErrTaken
	}
	return lease.New(func(ctx context.Context) error { return l.release(ctx, owner) }, token, nil), nil
}

func (l *Locker) release(ctx context.Context, owner string) error {
	// The release-race scenario pauses here, as it pauses v5 between its GET
	// and DEL; the script below checks the owner in the same step as it deletes.
	chaos.BeforeDelete(ctx)
	n, err := releaseScript.Run(ctx, l.rdb, []string{l.opts.Key}, owner).Int()
	if err != nil {
		return fmt.Errorf("lua: release %s: %w", l.opts.Key, err)
	}
	if n == 0 {
		return fmt.Errorf("lua: release %s: %w", l.opts.Key, lease.ErrNotHeld)
	}
	return nil
}
