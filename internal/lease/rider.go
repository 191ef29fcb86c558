package lease

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Rider is a holder's first command (the sale's read of the stock), sent in
// one round trip with the last step of an acquisition that has one: a
// hand-off's claim of its grant (-wait handoff). Without it the claim is a
// round trip of its own inside every hand-over, the lock idle meanwhile.
//
// The lock queues the claim, then the rider's command, on one pipeline: one
// connection, so Redis runs the claim first. The command's reply is the
// holder's only when the claim held (Rode): a claim that finds its grant
// taken back holds nothing, and the lock drops the reply and waits again, as
// it did before; the holder never acts on a read it made without the lock,
// and never writes on a failed claim, because it gets no lease. A lock with
// no such step (the lock was free at its attempt, or it waits another way)
// leaves the rider unsent, and the holder sends its command itself.
//
// One acquisition at a time: the lock that is given the rider (through the
// context, WithRider) calls Queue and Ride from the acquiring goroutine.
type Rider struct {
	queue func(pipe redis.Pipeliner, token int64)
	rode  bool
	sent  time.Time
}

// NewRider returns a Rider whose command queue adds to a pipeline; token is
// the fencing token the grant came with (0: none).
func NewRider(queue func(pipe redis.Pipeliner, token int64)) *Rider {
	return &Rider{queue: queue}
}

type riderKey struct{}

// WithRider returns ctx carrying r for the acquisition made with it.
func WithRider(ctx context.Context, r *Rider) context.Context {
	return context.WithValue(ctx, riderKey{}, r)
}

// RiderFrom returns the rider ctx carries, or nil.
func RiderFrom(ctx context.Context) *Rider {
	r, _ := ctx.Value(riderKey{}).(*Rider)
	return r
}

// Queue adds the rider's command to pipe, after the lock's own step, for a
// grant that came with token.
func (r *Rider) Queue(pipe redis.Pipeliner, token int64) { r.queue(pipe, token) }

// Ride says that the command queued last went out at sent with a claim that
// held: its reply is the holder's, and the hold began at sent.
func (r *Rider) Ride(sent time.Time) { r.rode, r.sent = true, sent }

// Rode reports whether the command rode with the acquisition that obtained
// the lock, and when that round trip was sent (the hold's start).
func (r *Rider) Rode() (time.Time, bool) { return r.sent, r.rode }
