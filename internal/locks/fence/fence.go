// Package fence issues fencing tokens for the single-key locks (v3 to v6): a
// number that grows with every acquisition, handed out in the same atomic step
// as the lock itself. The storage keeps the highest token it has accepted and
// refuses a write that carries an older one, so a holder that lost its lease
// without knowing it (a long pause, a slow sale) cannot overwrite its
// successor's work. (Kleppmann, "How to do distributed locking"; seed 003.)
//
// It also holds the one SET NX attempt those locks share, fenced or not.
//
// What it does not fix: the counter lives on the lock's Redis node. A node that
// restarts without persistence, or fails over to a replica that missed the
// last INCR, hands out old numbers again.
package fence

import (
	"context"
	_ "embed"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed acquire.lua
var acquireSrc string

var acquireScript = redis.NewScript(acquireSrc)

// CounterKey is the key of lockKey's fencing counter.
func CounterKey(lockKey string) string { return lockKey + ":fence" }

// Client is what one SET NX attempt needs.
type Client interface {
	redis.Scripter
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
}

// SetNX makes one SET key owner NX [PX ttl] attempt (ttl 0: no expiry). It
// reports whether owner took the lock and, when fenced, the token issued in
// the same atomic step (>= 1; 0 when unfenced).
func SetNX(ctx context.Context, rdb Client, key, owner string, ttl time.Duration, fenced bool) (bool, int64, error) {
	if !fenced {
		ok, err := rdb.SetNX(ctx, key, owner, ttl).Result()
		return ok, 0, err
	}
	token, err := acquireScript.Run(ctx, rdb, []string{key, CounterKey(key)}, owner, PX(ttl)).Int64()
	return token > 0, token, err
}

// PX is ttl in whole milliseconds for a script, 0 for no expiry: a lease
// shorter than a millisecond must not become "no expiry".
func PX(ttl time.Duration) int64 {
	if ms := ttl.Milliseconds(); ms > 0 || ttl <= 0 {
		return ms
	}
	return 1
}
