package scenario

import (
	"context"
	"fmt"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/reason"
	"github.com/redis/go-redis/v9"
)

// lostLease: S sells with hold 1.5 x TTL. Once S holds the lock and has read
// the stock, the lock's key vanishes from its node (the scenario deletes it:
// a node that restarts without persistence, or fails over to a replica that
// missed the key, forgets it the same way). B then takes the lock and sells.
// v7 never learns that it lost the lock: S writes what it read, and both sell
// the same unit. v8's watchdog finds the lease gone at its next renewal
// (within TTL/3) and closes the lease's Lost channel; the sale checks it
// before writing, so S stops (503 lease_lost) a whole TTL before its write.
func lostLease(ctx context.Context, e Env, lock string, before int64) (string, string, error) {
	reads, err := e.getCalls(ctx)
	if err != nil {
		return "", "", err
	}
	s := e.sell(ctx, lock, "hold="+(e.TTL*3/2).String())
	if err := e.waitRead(ctx, reads); err != nil {
		return "", "", err
	}
	if err := e.Redis.Del(ctx, e.Stores.LockKeys(lock)...).Err(); err != nil {
		return "", "", err
	}
	e.mark(reason.New("keyVanishes", "the lock's key vanishes"))
	rb := <-e.sell(ctx, lock, "")
	rs := <-s
	observed, detail, err := e.verdict(ctx, before, rs, rb)
	if err != nil || observed != NoOversell || rs.code != api.CodeLeaseLost || rb.outcome != api.Sold {
		return observed, detail, err
	}
	return StopsBeforeWrite, detail + ", the slow sale answered " + rs.code, nil
}

// waitRead waits until the lock is held and the stock's node has served more
// than reads GETs: the holder has read the stock.
func (e Env) waitRead(ctx context.Context, reads int64) error {
	if err := e.waitLock(ctx, true, 5*time.Second); err != nil {
		return fmt.Errorf("the first sale never took the lock: %w", err)
	}
	if err := e.waitUntil(ctx, 5*time.Second, func() (bool, error) {
		n, err := e.getCalls(ctx)
		return n > reads, err
	}); err != nil {
		return fmt.Errorf("the first sale never read the stock: %w", err)
	}
	return nil
}

// getCalls is how many GETs the stock's node has served.
func (e Env) getCalls(ctx context.Context) (int64, error) {
	return calls(ctx, e.Redis, "get")
}

// calls is how many times node has served the command cmd (lower case)
// since it started.
func calls(ctx context.Context, node *redis.Client, cmd string) (int64, error) {
	info, err := node.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	stat := infoField(info, "cmdstat_"+cmd)
	if stat == "" {
		return 0, nil // none served yet
	}
	var n int64
	_, err = fmt.Sscanf(stat, "calls=%d", &n)
	return n, err
}
