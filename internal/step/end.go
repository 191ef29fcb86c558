package step

import (
	"context"
	"fmt"
	"time"
)

func (s *Sale) finish(result any) {
	s.mu.Lock()
	s.finished, s.result, s.next, s.current = true, result, nil, nil
	s.left = s.crashed && s.owner != ""
	left := s.left
	s.notify()
	s.mu.Unlock()
	s.cancel(nil)
	s.gate.opts.Log.Info("stepped sale finished", "id", s.id, "steps", len(s.done), "cancelled", s.cancelled != nil, "crashed", s.crashed)
	if left {
		return // kept, its timers running, until its lock is forgotten (Cancel)
	}
	s.bound.Stop()
	s.idle.Stop()
	s.drop()
}

// drop forgets the sale Options.Keep from now.
func (s *Sale) drop() {
	time.AfterFunc(s.gate.opts.Keep, func() {
		s.gate.mu.Lock()
		defer s.gate.mu.Unlock()
		if s.gate.sales[s.id] == s {
			delete(s.gate.sales, s.id)
		}
	})
}

func (s *Sale) isFinished() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finished
}

func (s *Sale) isLeft() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.left
}

// Cancel stops the sale for why: it sends nothing more to the stock and
// gives up waiting for the lock, but still releases a lock it holds
// (ErrCancelled refuses every step but the release's). A finished sale is
// left as it is, but for a crashed one's lock: removed (forget) if it still
// holds the sale's owner.
func (s *Sale) Cancel(why string) {
	s.mu.Lock()
	if s.crashed {
		s.mu.Unlock()
		s.clear(why)
		return
	}
	if s.finished || s.cancelled != nil {
		s.mu.Unlock()
		return
	}
	// A paused sale wakes to release its lock: its held background
	// commands go on, or end with their own context (the watchdog's,
	// stopped by the release).
	s.paused = false
	s.cancelled, s.next = fmt.Errorf("%w: %s", ErrCancelled, why), nil
	s.notify()
	s.mu.Unlock()
	s.cancel(s.cancelled)
	s.gate.opts.Log.Info("stepped sale cancelled", "id", s.id, "why", why)
}

// clear removes the lock a crashed sale left, once its run has ended (no
// command of it can land after), if it still holds the sale's owner; once.
func (s *Sale) clear(why string) {
	ctx, cancel := context.WithTimeout(context.Background(), clearTimeout)
	defer cancel()
	s.mu.Lock()
	for !s.finished {
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			s.gate.opts.Log.Warn("crashed stepped sale still running: its lock is forgotten later", "id", s.id)
			return
		}
		s.mu.Lock()
	}
	if !s.left {
		s.mu.Unlock()
		return
	}
	forget, owner := s.forget, s.owner
	s.mu.Unlock()
	reply, err := forget(ctx, owner)
	if err != nil {
		reply = "(error) " + err.Error()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.left { // cleared meanwhile
		return
	}
	s.forgot = reply
	s.gate.opts.Log.Info("crashed stepped sale's lock forgotten", "id", s.id, "why", why, "reply", reply)
	if err != nil {
		s.notify()
		return // left: the next timer or reset tries again
	}
	s.left = false
	s.notify()
	s.bound.Stop()
	s.idle.Stop()
	s.drop()
}

// clearTimeout bounds the wait for a crashed sale's run to end and the
// removal of its lock.
const clearTimeout = 5 * time.Second
