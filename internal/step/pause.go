package step

import (
	"context"
	"slices"
	"strings"
	"time"
)

// Pausable lets the sale be paused (Pause): its server gives it for a lock
// whose background work goes through the gated client (v8's watchdog), the
// only work a pause adds to a sale already stopped before a step.
func (s *Sale) Pausable() {
	s.mu.Lock()
	s.pausable = true
	s.mu.Unlock()
}

// Pause freezes the sale, stopped before a step, as a GC pause or SIGSTOP
// freezes a process: its background commands are held at the gate, not
// sent, until Resume. Time runs on: a lease nobody renews runs out.
func (s *Sale) Pause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !s.pausable:
		return ErrNoPause
	case s.paused:
		return ErrPaused
	case s.next == nil || s.finished || s.cancelled != nil:
		return ErrNotStopped
	}
	s.paused = true
	s.notify()
	return nil
}

// Resume wakes a paused sale: the background commands it held are sent
// now, and the sale is stopped before the step it was paused at.
func (s *Sale) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.paused {
		return ErrNotPaused
	}
	s.paused = false
	s.notify()
	return nil
}

// Unheld waits until the background commands a pause held have been sent
// and answered, at most d (or until ctx ends), and returns the state: what
// a resume answers, once the renewal it let go has found what it found.
func (s *Sale) Unheld(ctx context.Context, d time.Duration) State {
	return s.await(ctx, d, func() bool {
		if len(s.held) > 0 || s.sending > 0 {
			return false
		}
		// A script answered NOSCRIPT is sent again as EVAL by the
		// client, in a command of its own: the answer is that one's.
		for i := len(s.done) - 1; i >= 0; i-- {
			if s.done[i].Phase == Background {
				return !strings.Contains(s.done[i].Reply, "NOSCRIPT")
			}
		}
		return true
	})
}

// hold waits while the sale is paused before a background command is sent
// (ctx its own), and refuses it once the sale crashed: a dead process's
// goroutines send nothing either.
func (s *Sale) hold(ctx context.Context, what string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused {
		h := &Step{Phase: Background, Command: what}
		s.held = append(s.held, h)
		s.notify()
		for s.paused && ctx.Err() == nil {
			changed := s.changed
			s.mu.Unlock()
			select {
			case <-changed:
			case <-ctx.Done():
			}
			s.mu.Lock()
		}
		s.held = slices.DeleteFunc(s.held, func(x *Step) bool { return x == h })
		s.notify()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if s.crashed {
		return ErrCrashed
	}
	return nil
}
