package step

import (
	"context"
)

// Owner tells ctx's stepped sale, if any, the value its lock holds once
// taken (the tutorial's uuid:goroutine-id): what a crash leaves behind in
// the store, and what the reset compares before it removes it.
func Owner(ctx context.Context, owner string) {
	if s := From(ctx); s != nil {
		s.mu.Lock()
		s.owner = owner
		s.mu.Unlock()
	}
}

// Crashable lets the sale crash (Crash): forget removes from the store the
// lock a crashed sale left, if it still holds owner, and answers what it
// did ("1": removed, "0": gone or another's). The caller gives it only for
// a lock it can remove so (a key in the stock's Redis).
func (s *Sale) Crashable(forget func(ctx context.Context, owner string) (string, error)) {
	s.mu.Lock()
	s.forget = forget
	s.mu.Unlock()
}

// Crash stops the sale where it stands, as a process dying would: it sends
// nothing more, not even its release (ErrCrashed), so a lock it holds stays
// in the store, as a real crash leaves it. The replica itself stays up;
// only this sale dies. The lock is removed when the sale is cancelled
// afterwards (the lesson's reset), when nobody looks at it for
// Options.Idle, or at Options.Bound.
func (s *Sale) Crash() error {
	s.mu.Lock()
	switch {
	case s.forget == nil:
		s.mu.Unlock()
		return ErrNoCrash
	case s.finished || s.cancelled != nil:
		s.mu.Unlock()
		return ErrNotStopped
	}
	s.crashed, s.cancelled, s.next, s.paused = true, ErrCrashed, nil, false
	s.notify()
	s.mu.Unlock()
	s.cancel(ErrCrashed)
	s.gate.opts.Log.Info("stepped sale crashed", "id", s.id)
	return nil
}
