package retry

import (
	"context"
	"errors"
	"time"

	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/handoff"
)

// Queuer is a guard whose lock can be handed over directly (-wait handoff,
// package handoff): its attempt queues the owner when the lock is taken, and
// its release hands the lock to the first owner queued.
type Queuer interface {
	Guard
	// TryOrQueue makes one attempt and, when the lock is taken, queues owner
	// as w says in the same step and answers lease.ErrTaken. When w.Queued,
	// a release may have handed owner the lock.
	TryOrQueue(ctx context.Context, owner string, w handoff.Waiter) (lease.Lease, error)
	// Granted claims the hold a release handed owner, with the token it
	// came with: its lease starts then. lease.ErrTaken when the grant was
	// taken back first (not claimed within the claim deadline).
	Granted(ctx context.Context, owner string, token int64) (lease.Lease, error)
	// Leave takes owner out of the queue and, if a release handed it the
	// lock meanwhile, passes the lock on.
	Leave(ctx context.Context, owner string) error
}

// HandedOff waits for a Queuer's lock to be handed to it.
type HandedOff struct {
	g     Queuer
	n     *Notifier
	count Counter
}

// Handoff returns g waiting through n's subscription for its release to hand
// it the lock: one attempt, and no more when the lock was taken (the release
// says so by message; a check every Backstop finds a grant whose message
// was lost, or a lock left free by a lease that ran out).
func Handoff(g Queuer, n *Notifier, count Counter) *HandedOff {
	return &HandedOff{g: g, n: n, count: count}
}

// Acquire tries the lock, queueing in the same step, and waits to be handed
// it. When ctx ends first it leaves the queue, passing on a lock handed over
// meanwhile, and returns an error wrapping context.Cause(ctx). A failed
// attempt leaves the queue too: its reply may have been lost after Redis
// queued the owner or gave it the lock.
func (w *HandedOff) Acquire(ctx context.Context, owner string) (lease.Lease, error) {
	attempts := 0
	defer func() { w.count.add(attempts) }()
	attemptCtx := context.WithoutCancel(ctx)
	granted := w.n.register(owner)
	defer w.n.unregister(owner)
	waiter := handoff.Waiter{Channel: w.n.grants, Wait: waitFor(ctx)}
	try := func(queued bool) (lease.Lease, error) {
		attempts++
		waiter.Queued = queued
		l, err := w.g.TryOrQueue(attemptCtx, owner, waiter)
		if err != nil && !errors.Is(err, lease.ErrTaken) {
			w.leave(attemptCtx, owner)
		}
		return l, err
	}
	if l, err := try(false); !errors.Is(err, lease.ErrTaken) {
		return l, err
	}
	timer := time.NewTimer(w.n.backstop)
	defer timer.Stop()
	for {
		select {
		case token := <-granted:
			// Its claim is a round trip, not an attempt: it cannot find
			// the lock taken, only its grant taken back.
			l, err := w.g.Granted(attemptCtx, owner, token)
			if err == nil {
				return l, nil
			}
			if !errors.Is(err, lease.ErrTaken) {
				w.leave(attemptCtx, owner)
				return nil, err
			}
			// Claimed too late: the grant went to the next waiter. Queue
			// again (or take the lock if it is free).
			if l, err := try(true); !errors.Is(err, lease.ErrTaken) {
				return l, err
			}
		case <-timer.C:
			if ctx.Err() != nil {
				continue // ctx.Done is ready: leave
			}
			if l, err := try(true); !errors.Is(err, lease.ErrTaken) {
				return l, err
			}
			timer.Reset(w.n.backstop)
		case <-ctx.Done():
			w.leave(attemptCtx, owner)
			return nil, notObtained(ctx, attempts)
		}
	}
}

// leave takes owner out of the queue, best effort: an entry left behind
// expires at its deadline, and a lock handed to it then waits for its lease.
func (w *HandedOff) leave(ctx context.Context, owner string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := w.g.Leave(ctx, owner); err != nil {
		w.n.log.Warn("leaving the hand-off queue", "owner", owner, "err", err)
	}
}
