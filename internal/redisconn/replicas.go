package redisconn

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// ReplicaWait is how long a write waits for its replicas' acknowledgements
// (WaitReplicas): well inside the client's one-second read timeout.
const ReplicaWait = 500 * time.Millisecond

// Pipeliner is the part of a Redis client WaitReplicas uses.
type Pipeliner interface {
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// WaitReplicas waits until n replicas have acknowledged every write whose
// reply the caller has already read, for at most timeout, and returns how
// many did: what the replica-acknowledged lock (internal/locks/replicaack)
// and the sale's replicated write both ask.
//
// WAIT counts the writes of the connection it is sent on, and the caller's
// write went out on whichever pooled connection was free. So it writes key
// (a scratch counter) and sends WAIT pipelined on one connection: that
// connection's last write comes after the caller's on the node (a node
// applies writes in order, and the caller's reply was already read), and
// replicas that acknowledged it acknowledged the caller's too. WAIT also
// makes the primary ask its replicas for their offsets at once, instead of
// their once-a-second report.
func WaitReplicas(ctx context.Context, rdb Pipeliner, key string, n int, timeout time.Duration) (int, error) {
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
