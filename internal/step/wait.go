package step

import (
	"context"
	"slices"
	"time"
)

// WaitBound is d for a sale that is not stepped; for a stepped one, at most
// the gate's Options.Wait: how long a wait for the lock may last.
func WaitBound(ctx context.Context, d time.Duration) time.Duration {
	if s := From(ctx); s != nil {
		return min(d, s.gate.opts.Wait)
	}
	return d
}

// WaitContext is the context of a wait for the lock of d (WaitBound's):
// context.WithTimeout for a sale that is not stepped. For a stepped sale d
// counts only the time the sale runs, not the time it is stopped at the
// gate: that time is the learner's.
// Counted from the request, a waiter started at a lesson's first click and
// stepped ten seconds later would give up at its first try; so counted, B
// run to its end waits its whole bound. Its deadline ends it with
// context.DeadlineExceeded, as Err and as the cause.
func WaitContext(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	s := From(ctx)
	if s == nil {
		return context.WithTimeout(ctx, d)
	}
	inner, cancel := context.WithCancelCause(ctx)
	c := &clock{left: d, fire: func() { cancel(context.DeadlineExceeded) }}
	s.mu.Lock()
	s.clocks = append(s.clocks, c)
	c.run()
	s.mu.Unlock()
	return waitCtx{inner, s, c}, func() {
		s.mu.Lock()
		c.pause()
		s.clocks = slices.DeleteFunc(s.clocks, func(x *clock) bool { return x == c })
		s.mu.Unlock()
		cancel(context.Canceled)
	}
}

// waitCtx is a wait on a stepped sale's running time: its deadline moves
// while the sale is stopped at the gate.
type waitCtx struct {
	context.Context
	s *Sale
	c *clock
}

// Deadline is when the wait ends if the sale runs from now on: a lock that
// waits in its server (GET_LOCK's timeout) is given the time left.
func (w waitCtx) Deadline() (time.Time, bool) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if w.c.timer != nil {
		return w.c.since.Add(w.c.left), true
	}
	return time.Now().Add(w.c.left), true
}

// Err is context.DeadlineExceeded once the wait's time is up, as a
// timeout's is.
func (w waitCtx) Err() error {
	err := w.Context.Err()
	if err != nil && context.Cause(w.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}

// clock is a wait's time left, running only while its sale runs; its
// sale's mu guards it.
type clock struct {
	left  time.Duration
	since time.Time   // when it last started running
	timer *time.Timer // nil while paused
	fire  func()
}

func (c *clock) run() {
	if c.timer != nil {
		return
	}
	if c.left <= 0 {
		c.fire()
		return
	}
	c.since, c.timer = time.Now(), time.AfterFunc(c.left, c.fire)
}

func (c *clock) pause() {
	if c.timer == nil {
		return
	}
	if c.timer.Stop() {
		c.left -= time.Since(c.since)
	} else {
		c.left = 0 // fired
	}
	c.timer = nil
}
