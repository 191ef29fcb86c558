// Package abandon is what a single-node lock does after an acquisition whose
// reply was lost (a timeout, a broken connection): Redis may have applied it,
// leaving a lock that nobody knows it holds, until its lease ends, or for
// v3, forever. As redsync does after a failed attempt, it releases what the
// owner may hold, owner-checked, best effort, before giving up.
package abandon

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/locklab/locklab/internal/redisconn"
	"github.com/redis/go-redis/v9"
)

//go:embed abandon.lua
var src string

var script = redis.NewScript(src)

// Timeout bounds the clean-up: it runs when the caller may be gone.
const Timeout = time.Second

// After returns err, the acquisition's error, having first deleted key if
// err leaves it unknown whether owner took it and owner holds it now. An
// error of the clean-up itself is joined to err: the lock may then stay until
// its lease ends.
func After(ctx context.Context, rdb redis.Scripter, key, owner string, err error) error {
	if !redisconn.Ambiguous(err) {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), Timeout)
	defer cancel()
	if cerr := script.Run(ctx, rdb, []string{key}, owner).Err(); cerr != nil {
		return errors.Join(err, fmt.Errorf("abandoning %s after a lost reply: %w", key, cerr))
	}
	return err
}
