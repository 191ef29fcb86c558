// Package replicaack makes a single-node lock wait for its node's replicas
// (seed 004's problem 4, Redisson's answer): Redis replicates asynchronously,
// so a lock the primary granted can be lost when the primary dies before a
// replica has it and that replica is promoted. After each acquisition the
// lock waits until n replicas have acknowledged it (Redis's WAIT), and gives
// the lock up when they have not within the timeout.
//
// The wait is redisconn.WaitReplicas (WAIT, pipelined after a scratch
// write on one connection), which the sale's replicated write shares.
package replicaack

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/redisconn"
	"github.com/redis/go-redis/v9"
)

// ErrNotAcknowledged means the lock was granted but too few replicas
// acknowledged it in time: it was released, and the sale sells nothing.
var ErrNotAcknowledged = errors.New("replicaack: the lock was not acknowledged by enough replicas")

// Locker is what it wraps: a lock version, its waiting composed.
type Locker interface {
	Acquire(ctx context.Context, owner string) (lease.Lease, error)
}

// Acked is l, waiting for n replica acknowledgements after each
// acquisition (n == 0: not at all, unless the request's chaos hook asks).
type Acked struct {
	l       Locker
	rdb     *redis.Client
	key     string
	n       int
	timeout time.Duration
}

// DefaultTimeout is how long an acquisition waits for the acknowledgements.
const DefaultTimeout = redisconn.ReplicaWait

// Wrap returns l waiting for n replicas of rdb's node, writing key (a scratch
// key beside the lock) to mark the point to acknowledge.
func Wrap(l Locker, rdb *redis.Client, key string, n int) *Acked {
	return &Acked{l: l, rdb: rdb, key: key, n: n, timeout: DefaultTimeout}
}

// Acquire obtains the lock, then waits for the acknowledgements; short of
// them it releases the lock and returns ErrNotAcknowledged.
func (a *Acked) Acquire(ctx context.Context, owner string) (lease.Lease, error) {
	l, err := a.l.Acquire(ctx, owner)
	n := chaos.LockAckWait(ctx, a.n)
	if err != nil || n == 0 {
		return l, err
	}
	got, err := a.wait(ctx, n)
	if err == nil && got >= n {
		return l, nil
	}
	relErr := l.Release(context.WithoutCancel(ctx))
	if err == nil {
		err = fmt.Errorf("%w: %d of %d within %s", ErrNotAcknowledged, got, n, a.timeout)
	} else {
		err = fmt.Errorf("%w: %w", ErrNotAcknowledged, err)
	}
	return nil, errors.Join(err, relErr)
}

// wait writes the scratch key and WAITs, both on one connection.
func (a *Acked) wait(ctx context.Context, n int) (int, error) {
	return redisconn.WaitReplicas(ctx, a.rdb, a.key, n, a.timeout)
}
