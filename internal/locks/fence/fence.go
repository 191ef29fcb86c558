// Package fence issues fencing tokens for the single-key locks (v3 to v6): a
// number that grows with every acquisition, handed out in the same atomic step
// as the lock itself. The storage keeps the highest token it has accepted and
// refuses a write that carries an older one, so a holder that lost its lease
// without knowing it (a long pause, a slow sale) cannot overwrite its
// successor's work. (Kleppmann, "How to do distributed locking"; seed 003.)
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

// TrySetNX makes one fenced SET NX attempt: the token (>= 1) when owner took
// the lock, 0 when another owner holds it. ttl 0 sets no expiry.
func TrySetNX(ctx context.Context, rdb redis.Scripter, key, owner string, ttl time.Duration) (int64, error) {
	ms := ttl.Milliseconds()
	if ttl > 0 && ms == 0 {
		ms = 1 // a lease shorter than a millisecond must not become "no expiry"
	}
	return acquireScript.Run(ctx, rdb, []string{key, CounterKey(key)}, owner, ms).Int64()
}
