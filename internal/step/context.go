package step

import (
	"context"
	"time"
)

type key struct{}

// From returns the stepped sale ctx carries, or nil: one context lookup,
// all an unarmed request costs.
func From(ctx context.Context) *Sale {
	s, _ := ctx.Value(key{}).(*Sale)
	return s
}

// Phase tells ctx's stepped sale, if any, which phase its next steps belong
// to (Acquire, Stock, Release).
func Phase(ctx context.Context, phase string) {
	if s := From(ctx); s != nil {
		s.mu.Lock()
		s.phase = phase
		s.mu.Unlock()
	}
}

// Stop stops ctx's stepped sale, if any, before one of its own steps (the
// check, the business work), until it is let go; Done records its outcome.
// It returns ErrCancelled when the sale was cancelled: the step must not be
// taken.
func Stop(ctx context.Context, what string) error {
	if s := From(ctx); s != nil {
		return s.stop("", what)
	}
	return nil
}

// Timeout is d for a sale that is not stepped, and d past the bound of
// ctx's stepped sale (never less than d): the time a stepped sale spends
// stopped at the gate is the learner's, not the step's own, and a release
// cut short by it would fail with its lock left behind (v5's story stops
// between the release's GET and its DEL for a whole lease). Its caller
// also bounds the step by d from the sale's cancellation (Cancelled).
func Timeout(ctx context.Context, d time.Duration) time.Duration {
	s := From(ctx)
	if s == nil {
		return d
	}
	return max(d, time.Until(s.started.Add(s.gate.opts.Bound))+d)
}

// Cancelled calls f once ctx's stepped sale is cancelled (at once if it is
// already; finished is not cancelled), and never for a sale that is not
// stepped; stop undoes it. A
// release given Timeout's long bound cancels itself d after the sale's
// cancellation, so that a cancelled sale (its page gone, the replica
// stopping) still ends within d of it, as an unstepped one would.
func Cancelled(ctx context.Context, f func()) (stop func() bool) {
	s := From(ctx)
	if s == nil {
		return func() bool { return false }
	}
	return context.AfterFunc(s.ctx, f) // the sale's own: ctx may be detached from it (a holder's)
}

// Sent is t, or, for ctx's stepped sale, when it let go the last of its
// own steps begun after t: the moment a command stopped at the gate was
// truly sent. A lease counted from before the gate (lease.ValidUntil)
// would count the learner's time stopped there: B, stopped before its
// acquire while A's lease ran out, would be granted a lease already over.
func Sent(ctx context.Context, t time.Time) time.Time {
	s := From(ctx)
	if s == nil {
		return t
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.done) - 1; i >= 0; i-- {
		if d := s.done[i]; d.Phase != Background {
			if d.Start.After(t) {
				return d.Start
			}
			break
		}
	}
	return t
}
