// Package step stops one sale before each of its steps, so that a learner can
// drive two sales on the real stack one command at a time and see the race
// the tutorial tells (A reads 10, B reads 10, both write 9).
//
// The gate sits in the clients, not in the locks: a go-redis hook (Hook) sees
// every command any version sends, with its reply, so one hook per client
// covers every version without code in each lock. The sale announces its own
// steps that are not commands (the check, the business work) and its phase
// (acquire, stock, release) through the context (Stop, Done, Phase).
//
// A sale is armed per request (Gate.Start); an unarmed one costs one context
// lookup per command. An armed sale never stays stopped for long: it is
// cancelled when asked (Sale.Cancel), when nobody has looked at it for
// Options.Idle (the page went away), or at Options.Bound, and a cancelled
// sale sends nothing more to the stock but still releases its lock, so
// nothing is left behind.
//
// A sale may also crash (Sale.Crash): it stops where it stands and sends
// nothing more, not even its release, as a process dying would. Its lock
// stays in the store until the lesson is reset, the page goes away, or the
// bound: then the forget function its server gave (Sale.Crashable) removes
// the lock if it still holds the sale's owner (Owner), never another's.
//
// A sale stopped before a step may be paused (Sale.Pause), as a GC pause or
// SIGSTOP freezes a whole process: its background commands (v8's watchdog)
// are held at the gate too, not sent, until it resumes (Sale.Resume), so a
// lease its watchdog renewed runs out for real. A paused sale is cancelled
// by the reset, the idle timer and the bound like any other: the
// cancellation resumes it, and it releases its lock.
package step

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/petermattis/goid"
)

var (
	// ErrCancelled is a step refused because its sale was cancelled (reset,
	// abandoned, or past the bound): the command was never sent.
	ErrCancelled = errors.New("step: the stepped sale was cancelled")
	// ErrNotStopped is an advance asked of a sale that is not stopped at a
	// step (still running its last one, or done).
	ErrNotStopped = errors.New("step: the sale is not stopped at a step")
	// ErrInUse is a sale started with the id of one still running.
	ErrInUse = errors.New("step: a stepped sale with this id is still running")
	// ErrFull is a sale started while Options.Max stepped sales run.
	ErrFull = errors.New("step: too many stepped sales at once")
	// ErrCrashed is a step refused because its sale crashed (Sale.Crash):
	// nothing more is sent, not even the release. It is ErrCancelled too.
	ErrCrashed = fmt.Errorf("%w: it crashed, as a process dying would: it sends nothing more, not even its release", ErrCancelled)
	// ErrNoCrash is a crash asked of a sale whose lock a reset could not
	// remove (Sale.Crashable was not called for it).
	ErrNoCrash = errors.New("step: this sale's lock cannot be crashed in a lesson: only a lock that is one key in the stock's Redis (v3-v8), which the lesson's reset can remove")
	// ErrNoPause is a pause asked of a sale with no background work the
	// gate can hold (Sale.Pausable was not called for it).
	ErrNoPause = errors.New("step: pausing freezes a sale's background work, as a paused process freezes its watchdog; this lock has none, so a sale stopped before a step is already as frozen as it gets")
	// ErrPaused is a step, an end or a second pause asked of a paused sale.
	ErrPaused = errors.New("step: the sale is paused, frozen as a stopped process: resume it first")
	// ErrNotPaused is a resume asked of a sale that is not paused.
	ErrNotPaused = errors.New("step: the sale is not paused")
	// ErrBadID is an id that is not a plain token.
	ErrBadID = errors.New("step: the id must be 1-64 letters, digits, '.', '_', ':' or '-'")
)

// The phases of a sale, as the sale announces them (Phase). Background is
// a command sent by another goroutine on the sale's behalf (v8's watchdog,
// redsync's per-node calls): shown, never stopped (see Sale.run).
const (
	Acquire    = "acquire"
	Stock      = "stock"
	Release    = "release"
	Background = "background"
)

// Step is one step of a sale: a command sent (with its reply once done) or
// one of the sale's own steps.
type Step struct {
	N     int    `json:"n"`
	Phase string `json:"phase,omitempty"`
	// Node is the server the command went to, where a lock speaks to more
	// than one (Redlock's nodes: "redis-6382"); "" for the stock's.
	Node    string    `json:"node,omitempty"`
	Command string    `json:"command"`         // "SET inventoryRedisLock 7f3c... NX PX 10000", "check: stock 10 > 0"
	Reply   string    `json:"reply,omitempty"` // "OK", "\"10\"", "(nil)", "(error) ..."
	Start   time.Time `json:"start,omitzero"`  // when it was let go (zero while pending)
	End     time.Time `json:"end,omitzero"`
}

// State is a stepped sale as GET /steps/{id} shows it.
type State struct {
	ID string `json:"id"`
	// State is "stopped" (before Next), "running" (a step or the time
	// between two), or "done".
	State   string    `json:"state"`
	Phase   string    `json:"phase,omitempty"`
	Done    []Step    `json:"done"`
	Next    *Step     `json:"next,omitempty"`
	ToEnd   bool      `json:"to_end,omitempty"`
	Started time.Time `json:"started"`
	// Deadline is the bound: the sale is cancelled then if still running.
	Deadline  time.Time `json:"deadline"`
	Cancelled string    `json:"cancelled,omitempty"` // why, when it was
	// Result is what the sale answered, once done.
	Result any `json:"result,omitempty"`
	// Crashed says that the sale crashed (Sale.Crash): it sent nothing
	// after, not even its release.
	Crashed bool `json:"crashed,omitempty"`
	// Left says that a crashed sale's lock may still be in the store: it
	// is removed at the reset (Cancel), when nobody looks, or at the bound.
	Left bool `json:"left,omitempty"`
	// Forgot is what removing a crashed sale's lock answered: "1" (its
	// key deleted), "0" (gone, or another's: left alone), or an error.
	Forgot string `json:"forgot,omitempty"`
	// Paused says that the sale is paused (Sale.Pause): neither it nor its
	// background goroutines send anything until it resumes.
	Paused bool `json:"paused,omitempty"`
	// Held are the background commands the pause holds, not sent yet
	// (v8's watchdog's renewal).
	Held []Step `json:"held,omitempty"`
}

// Sale is one stepped sale.
type Sale struct {
	id      string
	gate    *Gate
	goid    int64 // the goroutine that runs the sale: only its steps stop
	started time.Time
	ctx     context.Context // the sale's own: cancelled by Cancel
	cancel  context.CancelCauseFunc
	bound   *time.Timer
	idle    *time.Timer

	mu        sync.Mutex
	phase     string
	done      []Step
	next      *Step // stopped before it
	current   *Step // let go, not done yet
	n         int
	permit    bool
	toEnd     bool
	cancelled error
	finished  bool
	result    any
	changed   chan struct{} // closed, and replaced, at every change
	clocks    []*clock      // the waits running on the sale's time (WaitContext)

	owner   string // the value its lock holds once taken (Owner)
	forget  func(ctx context.Context, owner string) (string, error)
	crashed bool
	left    bool   // crashed, its lock maybe still in the store
	forgot  string // what forget answered

	pausable bool
	paused   bool
	held     []*Step // background commands held while paused
	sending  int     // background commands held or sent, not answered yet
}

// notify wakes whoever waits for a change; s.mu held.
func (s *Sale) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// State returns the sale as it is now.
func (s *Sale) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := State{ID: s.id, State: "running", Phase: s.phase, Done: append([]Step{}, s.done...), ToEnd: s.toEnd,
		Started: s.started, Deadline: s.started.Add(s.gate.opts.Bound), Result: s.result}
	switch {
	case s.finished:
		st.State = "done"
	case s.next != nil:
		st.State = "stopped"
		next := *s.next
		st.Next = &next
	}
	if s.cancelled != nil {
		st.Cancelled = s.cancelled.Error()
	}
	st.Crashed, st.Left, st.Forgot = s.crashed, s.left, s.forgot
	st.Paused = s.paused
	for _, h := range s.held {
		st.Held = append(st.Held, *h)
	}
	return st
}

// Next lets the sale take the step it is stopped before.
func (s *Sale) Next() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused {
		return ErrPaused
	}
	if s.next == nil {
		return ErrNotStopped
	}
	s.permit, s.next = true, nil // let go: no longer stopped
	s.notify()
	return nil
}

// End lets the sale run to its end without stopping again; refused while
// it is paused.
func (s *Sale) End() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused {
		return ErrPaused
	}
	s.toEnd, s.next = true, nil
	s.notify()
	return nil
}

// Settle waits until the sale is stopped at a step or done, at most d (or
// until ctx ends), and returns its state: what an advance answers, once the
// step it let go has run.
func (s *Sale) Settle(ctx context.Context, d time.Duration) State {
	return s.await(ctx, d, func() bool { return s.finished || s.next != nil })
}

// await waits until done holds (asked under the sale's lock, again at each
// change), at most d or until ctx ends, and returns the state then.
func (s *Sale) await(ctx context.Context, d time.Duration, done func() bool) State {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		s.mu.Lock()
		ok, changed := done(), s.changed
		s.mu.Unlock()
		if ok {
			return s.State()
		}
		select {
		case <-changed:
		case <-t.C:
			return s.State()
		case <-ctx.Done():
			return s.State()
		}
	}
}

// Done records the outcome of the step Stop let go.
func Done(ctx context.Context, reply string) {
	if s := From(ctx); s != nil {
		s.complete(reply)
	}
}

// Run takes one step of the sale described by what, as the gates in the
// clients do (Hook, and those in the packages beside this one for clients
// this package must not link: etcd's gRPC): on the sale's own goroutine it
// stops first and records the reply do returns; on any other it runs at once
// and is recorded as Background. It returns ErrCancelled, do not called, when
// the step must not be taken. ctx is the request's own: a paused sale holds
// a background request until it resumes or ctx ends.
func (s *Sale) Run(ctx context.Context, what string, do func() string) error {
	return s.run(ctx, "", what, do)
}

// run takes one step described by what: on the sale's own goroutine it
// stops first (Stop) and records the reply do returns; on any other
// goroutine it runs at once and is recorded as Background. The background
// is shown, not stopped: v8's watchdog renewing in real time while its
// holder is stopped is the very thing v8 fixes, and stopping it would turn
// v8's story into v7's. redsync's per-node calls run in goroutines too:
// shown, each named by its node (Hook.Node), not stopped; the Redlock
// attempt that sends them is stopped as a whole, by the lock itself, on
// the sale's goroutine (package redlock). Only a
// paused sale (Pause) holds them, until it resumes, is cancelled, or ctx,
// the command's own, ends.
func (s *Sale) run(ctx context.Context, node, what string, do func() string) error {
	if goid.Get() != s.goid {
		s.mu.Lock()
		s.sending++
		s.mu.Unlock()
		if err := s.hold(ctx, what); err != nil {
			s.mu.Lock()
			s.sending--
			s.notify()
			s.mu.Unlock()
			return err
		}
		start := time.Now()
		reply := do()
		s.mu.Lock()
		s.sending--
		s.n++
		s.done = append(s.done, Step{N: s.n, Phase: Background, Node: node, Command: what, Reply: reply, Start: start, End: time.Now()})
		s.notify()
		s.mu.Unlock()
		return nil
	}
	if err := s.stop(node, what); err != nil {
		return err
	}
	s.complete(do())
	return nil
}

func (s *Sale) stop(node, what string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	st := &Step{N: s.n, Phase: s.phase, Node: node, Command: what}
	paused := false
	for {
		// A cancelled sale sends nothing more, even running to its end,
		// but a held lock is always released: unless it crashed.
		if s.cancelled != nil && (s.crashed || s.phase != Release) {
			s.next = nil
			s.notify()
			return s.cancelled
		}
		if s.permit || s.toEnd || s.cancelled != nil {
			break
		}
		if !paused { // the time stopped here is the learner's, not its waits'
			paused = true
			for _, c := range s.clocks {
				c.pause()
			}
		}
		s.next = st
		s.notify()
		changed := s.changed
		s.mu.Unlock()
		<-changed
		s.mu.Lock()
	}
	if paused {
		for _, c := range s.clocks {
			c.run()
		}
	}
	s.permit, s.next = false, nil
	st.Start = time.Now()
	s.current = st
	s.notify()
	return nil
}

func (s *Sale) complete(reply string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current == nil {
		return
	}
	s.current.Reply, s.current.End = reply, time.Now()
	s.done = append(s.done, *s.current)
	s.current = nil
	s.notify()
}
