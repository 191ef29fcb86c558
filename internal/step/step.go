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
	"log/slog"
	"slices"
	"strings"
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

// Options configure a Gate. Zero fields take the defaults.
type Options struct {
	// Bound is the longest a stepped sale may run: past it, it is
	// cancelled. Default 5 minutes.
	Bound time.Duration
	// Idle cancels a sale nobody has read or advanced for this long: the
	// page that drove it went away (it reads the state while open).
	// Default 30 s.
	Idle time.Duration
	// Keep is how long a finished sale's state can still be read. Default
	// 1 minute.
	Keep time.Duration
	// Max is how many stepped sales may run at once. Default 16.
	Max int
	// Wait is the longest a stepped sale waits for a lock (WaitBound),
	// counted in its running time only. Default 5 s: half the lesson's
	// lease, so that a waiter is seen to give up before a lease could free
	// the lock (v6's nested acquisition, waiting on its own lock, would
	// otherwise be served by its own lease running out).
	Wait time.Duration
	Log  *slog.Logger
}

// Defaults of Options.
const (
	DefaultBound = 5 * time.Minute
	DefaultIdle  = 30 * time.Second
	DefaultKeep  = time.Minute
	DefaultMax   = 16
	DefaultWait  = 5 * time.Second
)

// Gate holds one replica's stepped sales, by id.
type Gate struct {
	opts    Options
	mu      sync.Mutex
	sales   map[string]*Sale
	running sync.WaitGroup
}

// New returns a Gate.
func New(opts Options) *Gate {
	if opts.Bound <= 0 {
		opts.Bound = DefaultBound
	}
	if opts.Idle <= 0 {
		opts.Idle = DefaultIdle
	}
	if opts.Keep <= 0 {
		opts.Keep = DefaultKeep
	}
	if opts.Max <= 0 {
		opts.Max = DefaultMax
	}
	if opts.Wait <= 0 {
		opts.Wait = DefaultWait
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Gate{opts: opts, sales: map[string]*Sale{}}
}

// Step is one step of a sale: a command sent (with its reply once done) or
// one of the sale's own steps.
type Step struct {
	N       int       `json:"n"`
	Phase   string    `json:"phase,omitempty"`
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

type key struct{}

// From returns the stepped sale ctx carries, or nil: one context lookup,
// all an unarmed request costs.
func From(ctx context.Context) *Sale {
	s, _ := ctx.Value(key{}).(*Sale)
	return s
}

// Start arms a stepped sale under id and runs it: run is called in a
// goroutine of its own with a context that carries the sale, detached from
// ctx's cancellation (the request that started it answers at once; the sale
// lives until it finishes or is cancelled). Its result is kept for State.
func (g *Gate) Start(ctx context.Context, id string, run func(ctx context.Context) any) (*Sale, error) {
	if !validID(id) {
		return nil, ErrBadID
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if old := g.sales[id]; old != nil && (!old.isFinished() || old.isLeft()) {
		return nil, ErrInUse
	}
	live := 0
	for _, s := range g.sales {
		if !s.isFinished() {
			live++
		}
	}
	if live >= g.opts.Max {
		return nil, fmt.Errorf("%w (%d)", ErrFull, g.opts.Max)
	}
	s := &Sale{id: id, gate: g, started: time.Now(), changed: make(chan struct{})}
	sctx, cancel := context.WithCancelCause(context.WithValue(context.WithoutCancel(ctx), key{}, s))
	s.ctx, s.cancel = sctx, cancel
	s.bound = time.AfterFunc(g.opts.Bound, func() { s.Cancel("past the bound of " + g.opts.Bound.String()) })
	s.idle = time.AfterFunc(g.opts.Idle, func() { s.Cancel("abandoned: nobody looked at it for " + g.opts.Idle.String()) })
	g.sales[id] = s
	g.running.Add(1)
	started := make(chan struct{})
	go func() {
		defer g.running.Done()
		s.goid = goid.Get()
		close(started)
		s.finish(run(sctx))
	}()
	<-started // goid set before any step can be taken
	return s, nil
}

// Get returns the sale under id, and counts as a look at it (Options.Idle).
func (g *Gate) Get(id string) (*Sale, bool) {
	g.mu.Lock()
	s := g.sales[id]
	g.mu.Unlock()
	if s == nil {
		return nil, false
	}
	s.idle.Reset(g.opts.Idle) // a finished sale's timer fires into a no-op Cancel
	return s, true
}

// Close cancels every stepped sale and waits until each has finished
// (released its lock): a stopping replica leaves nothing behind.
func (g *Gate) Close() {
	g.mu.Lock()
	for _, s := range g.sales {
		s.Cancel("the replica is shutting down")
	}
	g.mu.Unlock()
	g.running.Wait()
}

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

// Settle waits until the sale is stopped at a step or done, at most d (or
// until ctx ends), and returns its state: what an advance answers, once the
// step it let go has run.
func (s *Sale) Settle(ctx context.Context, d time.Duration) State {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		s.mu.Lock()
		settled, changed := s.finished || s.next != nil, s.changed
		s.mu.Unlock()
		if settled {
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

// Unheld waits until the background commands a pause held have been sent
// and answered, at most d (or until ctx ends), and returns the state: what
// a resume answers, once the renewal it let go has found what it found.
func (s *Sale) Unheld(ctx context.Context, d time.Duration) State {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		s.mu.Lock()
		busy, changed := len(s.held) > 0 || s.sending > 0, s.changed
		// A script answered NOSCRIPT is sent again as EVAL by the
		// client, in a command of its own: the answer is that one's.
		for i := len(s.done) - 1; i >= 0 && !busy; i-- {
			if s.done[i].Phase == Background {
				busy = strings.Contains(s.done[i].Reply, "NOSCRIPT")
				break
			}
		}
		s.mu.Unlock()
		if !busy {
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
		return s.stop(what)
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
	return s.run(ctx, what, do)
}

// run takes one step described by what: on the sale's own goroutine it
// stops first (Stop) and records the reply do returns; on any other
// goroutine it runs at once and is recorded as Background. The background
// is shown, not stopped: v8's watchdog renewing in real time while its
// holder is stopped is the very thing v8 fixes, and stopping it would turn
// v8's story into v7's. redsync's per-node calls run in goroutines too:
// shown, not stopped (see the package's report of what is left). Only a
// paused sale (Pause) holds them, until it resumes, is cancelled, or ctx,
// the command's own, ends.
func (s *Sale) run(ctx context.Context, what string, do func() string) error {
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
		s.done = append(s.done, Step{N: s.n, Phase: Background, Command: what, Reply: reply, Start: start, End: time.Now()})
		s.notify()
		s.mu.Unlock()
		return nil
	}
	if err := s.stop(what); err != nil {
		return err
	}
	s.complete(do())
	return nil
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

func (s *Sale) stop(what string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	st := &Step{N: s.n, Phase: s.phase, Command: what}
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

func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range []byte(id) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._:-", c) >= 0) {
			return false
		}
	}
	return true
}
