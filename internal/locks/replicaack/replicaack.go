// Package replicaack makes a single-node lock wait for its node's replicas
// (seed 004's problem 4, Redisson's answer): Redis replicates asynchronously,
// so a lock the primary granted can be lost when the primary dies before a
// replica has it and that replica is promoted. After each acquisition the
// lock waits until n replicas have acknowledged it (Redis's WAIT), and gives
// the lock up when they have not within the timeout.
//
// WAIT counts the writes of the connection it is sent on, and the locks'
// scripts run on whichever pooled connection is free. So the check sends,
// pipelined on one connection, a write of its own (INCR of a scratch key)
// and WAIT: that connection's last write comes after the lock's (a node
// applies writes in order, and the lock's reply was already read), and
// replicas that acknowledged it acknowledged the lock too. WAIT also makes
// the primary ask its replicas for their offsets at once, instead of their
// once-a-second report.
package replicaack

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/lease"
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

// DefaultTimeout is how long an acquisition waits for the acknowledgements:
// well inside the client's one-second read timeout.
const DefaultTimeout = 500 * time.Millisecond

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
	return Wait(ctx, a.rdb, a.key, n, a.timeout)
}

// Pipeliner is the part of a Redis client Wait uses.
type Pipeliner interface {
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// Wait waits until n replicas have acknowledged every write whose reply
// the caller has already read, for at most timeout, and returns how many
// did. It writes key (a scratch counter) and sends WAIT pipelined on one
// connection: WAIT counts that connection's writes, and the scratch write
// comes after the caller's on the node.
func Wait(ctx context.Context, rdb Pipeliner, key string, n int, timeout time.Duration) (int, error) {
	ctx = context.WithoutCancel(ctx) // a holder's step: its outcome must be known
	var wait *redis.Cmd
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, key)
		wait = p.Do(ctx, "wait", n, timeout.Milliseconds())
		return nil
	})
	if err != nil {
		return 0, err
	}
	return wait.Int()
}
