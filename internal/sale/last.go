package sale

import (
	"context"
	"errors"
	"time"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/redisconn"
	"github.com/redis/go-redis/v9"
)

// errNotAhead is a write that was to leave with the release and did not: the
// release sent no command (its client was not made by redisconn). It was never
// sent, and is not sent after the release: nothing sold.
var errNotAhead = errors.New("sale: the stock write was to leave with the release, which sent nothing (a Redis client not made by redisconn): nothing sold")

// hold is a sale's hold of its lock, released once: by the sale's deferred
// release or, when the write rides ahead of the release (redisconn.Ahead), by the
// write, the release's error kept for the deferred call.
type hold struct {
	s     *Service
	l     lease.Lease
	tr    *Trace
	ahead bool // the write leaves with the release

	done bool
	err  error
}

// newHold is the hold of l. Its write rides ahead of its release only where
// the first read rode with the claim (first: a hand-off, not stepped, the lock
// on) and nothing is to come between the write and the release: no replica
// acknowledgement to wait for under the lock, no pause asked inside the
// release (which would delay the write past it), no fence of a domain of
// its own to delete first.
func (s *Service) newHold(ctx context.Context, l lease.Lease, tr *Trace, first *firstRead) *hold {
	f := chaos.From(ctx)
	ahead := first != nil && f.BeforeDelete == nil && !f.Off.Fence && chaos.WriteAckWait(ctx, s.replicaAck) == 0
	return &hold{s: s, l: l, tr: tr, ahead: ahead}
}

// release releases the lock, once, carrying a ahead of its first command
// (nil: nothing).
func (h *hold) release(ctx context.Context, a *redisconn.Ahead) error {
	if h.done {
		return h.err
	}
	h.done = true
	if a != nil {
		ctx = redisconn.WithAhead(ctx, a)
	}
	h.err = h.s.release(ctx, h.l, h.tr)
	return h.err
}

// lease is the hold's lease; nil: no lock.
func (h *hold) lease() lease.Lease {
	if h == nil {
		return nil
	}
	return h.l
}

// writeAhead writes the stock as write does, the command leaving with the
// release: a SET, or fenced the fenced script sent whole (EVAL: a NOSCRIPT
// could not be answered by sending it again, after the release).
func (s *Service) writeAhead(ctx context.Context, h *hold, n int64, f *fencing) (time.Time, error) {
	var cmd redis.Cmder
	if f == nil {
		cmd = redis.NewStatusCmd(ctx, "set", s.key, n)
	} else {
		cmd = redis.NewCmd(ctx, "eval", fencedSrc, 2, s.key, f.key, f.token, f.owner, n)
	}
	a := redisconn.NewAhead(cmd)
	_ = h.release(ctx, a) // its error is the deferred release's to report
	at, sent := a.Sent()
	if !sent {
		return time.Time{}, errNotAhead
	}
	h.tr.Releasing = at // the release left with the write, which Redis ran first
	if f == nil {
		if err := cmd.Err(); err != nil {
			return at, writeError("sale: write stock", err)
		}
		return at, nil
	}
	return at, s.fencedWrite(cmd.(*redis.Cmd), f)
}
