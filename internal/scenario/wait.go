package scenario

import (
	"context"
	"errors"
	"fmt"
	"time"

	dblock "github.com/locklab/locklab/internal/locks/db"
	librueidislock "github.com/locklab/locklab/internal/locks/rueidislock"
	zklock "github.com/locklab/locklab/internal/locks/zk"
	"github.com/locklab/locklab/internal/versions"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// waitLock waits until the lock key exists (or is gone), for at most limit.
func (e Env) waitLock(ctx context.Context, exists bool, limit time.Duration) error {
	return e.waitUntil(ctx, limit, func() (bool, error) {
		locked, err := e.locked(ctx)
		return locked == exists, err
	})
}

// locked reports whether the running cell's lock is taken: its key exists
// in Redis, or for etcd a key exists under its prefix (a holder's, or a
// waiter's behind it).
func (e Env) locked(ctx context.Context) (bool, error) {
	if versions.NeedsDB(e.lock) {
		if e.DB == nil {
			return false, errors.New("scenario: no database to watch the " + e.lock + " lock")
		}
		switch e.lock {
		case "db-seed":
			return dblock.SeedHeld(ctx, e.DB, e.LockKey)
		case "db-getlock":
			return dblock.GetLockHeld(ctx, e.DB, e.LockKey)
		}
		return dblock.Held(ctx, e.DB, e.LockKey)
	}
	if versions.NeedsZK(e.lock) {
		if e.ZK == nil {
			return false, errors.New("scenario: no ZooKeeper session to watch the zk lock")
		}
		return zklock.Held(ctx, e.ZK, e.LockKey)
	}
	if e.lock != "etcd" {
		n, err := e.Redis.Exists(ctx, e.lockKeys(e.lock)...).Result()
		return n > 0, err
	}
	if e.Etcd == nil {
		return false, errors.New("scenario: no etcd client to watch the etcd lock")
	}
	resp, err := e.Etcd.Get(ctx, e.LockKey+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return false, fmt.Errorf("scenario: etcd: %w", err)
	}
	return resp.Count > 0, nil
}

// lockKeys are lock's keys in the stock's Redis node: the lock key, or
// rueidislock's keys of it (one per key of its majority).
func (e Env) lockKeys(lock string) []string {
	switch lock {
	case "rueidislock":
		return librueidislock.Keys(e.LockKey, 2)
	case "rueidislock-1":
		return librueidislock.Keys(e.LockKey, 1)
	}
	return []string{e.LockKey}
}

// waitUntil polls cond, an observable state, for at most limit.
func (e Env) waitUntil(ctx context.Context, limit time.Duration, cond func() (bool, error)) error {
	return waitEvery(ctx, limit, 2*time.Millisecond, cond)
}

// waitEvery is waitUntil asking cond every interval: what takes a
// sentinel's view seconds to change is asked less often.
func waitEvery(ctx context.Context, limit, interval time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("timed out after " + limit.String())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval): // polling the observable state
		}
	}
}
