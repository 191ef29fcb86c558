package lab

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/locklab/locklab/internal/api"
)

// A lesson may fault the stack's own processes, as the fault cells do, but
// one click at a time: freeze a replica (freeze.go: the frozen holder's
// stories) or stop a Redis node and start it again (nodes.go: Redlock's
// restart story). Every such fault is held here with what undoes it, and is
// always undone: when the page asks, at the reset and when the page goes
// away (the sale's DELETE), at its bound, and when the lab closes. One room
// for both, so that each is refused the same way (busy, or no local
// cluster) and undone the same way.

// Freezer stops (SIGSTOP) and resumes (SIGCONT) a process of the stack by
// name: the local cluster's (package cluster). The lab's lessons fault
// through it; where it can also kill a Redis node and start it again
// (Killer), the Redlock lessons are offered too.
type Freezer interface {
	Freeze(name string, frozen bool) error
}

// The lab's words for why no lesson can fault a process here, and the
// command that starts a stack where one can.
const (
	freezeCommand  = "make up"
	whyNoFreezeHow = "this lab has no local cluster whose processes it can freeze or stop (it was started without one, as the Compose stack starts it: its container cannot signal another container's process)"
)

// freezer is the stack's Freezer, or why there is none ("" when there is).
func (l *Lab) freezer(ctx context.Context) (Freezer, string) {
	if l.cfg.Freezer == nil {
		return nil, whyNoFreezeHow
	}
	f, err := l.cfg.Freezer(ctx)
	if err != nil {
		return nil, "the lab could not read the local cluster's state: " + err.Error()
	}
	return f, ""
}

// refuseBusy answers 409 and true while a run or a cell uses the stack: a
// lesson's sales, frozen replicas and stopped nodes are theirs too. what is
// what the lesson would have done ("steps its sales on the same stock and
// lock").
func (l *Lab) refuseBusy(w http.ResponseWriter, what string) bool {
	l.mu.Lock()
	busy := l.busy
	l.mu.Unlock()
	if busy == "" {
		return false
	}
	writeError(w, http.StatusConflict, "busy", busy+" is running on the stack: a lesson "+what+", so wait for it to end (or stop it)")
	return true
}

// held are the faults a lesson put on the stack, by what they fault
// ("replica inventory-1", "node redis-6382"), each with what undoes it and
// the timer that does so at its bound. mu is held across a fault's doing
// and undoing: one at a time.
type held struct {
	mu     sync.Mutex
	faults map[string]*fault
	// killer is the cluster every stopped node is started again from,
	// while a lesson holds one (nodes.go); nil when none.
	killer Killer
}

type fault struct {
	until time.Time
	timer *time.Timer
	undo  func() error
}

// has says whether what is faulted by a lesson and not yet undone.
func (l *Lab) has(what string) bool {
	l.held.mu.Lock()
	defer l.held.mu.Unlock()
	_, ok := l.held.faults[what]
	return ok
}

// hold records a fault just put on what (l.held.mu held), undone by undo
// at bound at the latest (tried again each second until it works), and
// answers when.
func (l *Lab) hold(what string, bound time.Duration, undo func() error) time.Time {
	if l.held.faults == nil {
		l.held.faults = map[string]*fault{}
	}
	f := &fault{until: time.Now().Add(bound), undo: undo}
	f.timer = time.AfterFunc(bound, func() {
		if err := l.undo(what, "its bound"); err != nil { // logged: try again in a second
			l.held.mu.Lock()
			if g, ok := l.held.faults[what]; ok && g == f {
				f.timer.Reset(time.Second)
			}
			l.held.mu.Unlock()
		}
	})
	l.held.faults[what] = f
	l.cfg.Log.Info("a lesson faulted the stack", "what", what, "bound", bound)
	return f.until
}

// holdOnce puts a lesson's fault on what unless it holds that one already,
// then answers the page with then(until), all under l.held.mu: one fault
// at a time. Refused (409) while a run or a cell uses the stack (doing:
// what the lesson would do, as refuseBusy takes it). start does the fault
// and answers what undoes it, held for bound; its error is the 503's
// message, and nothing is held.
func (l *Lab) holdOnce(w http.ResponseWriter, doing, what string, bound time.Duration, start func() (undo func() error, err error), then func(w http.ResponseWriter, until time.Time)) {
	if l.refuseBusy(w, doing) {
		return
	}
	l.held.mu.Lock()
	defer l.held.mu.Unlock()
	if _, ok := l.held.faults[what]; !ok {
		undo, err := start()
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
			return
		}
		l.hold(what, bound, undo)
	}
	then(w, l.held.faults[what].until)
}

// undo undoes the fault on what if a lesson holds one (by: who asked, for
// the log); nothing to undo is no error.
func (l *Lab) undo(what, by string) error {
	l.held.mu.Lock()
	defer l.held.mu.Unlock()
	return l.undoLocked(what, by)
}

func (l *Lab) undoLocked(what, by string) error {
	f, ok := l.held.faults[what]
	if !ok {
		return nil
	}
	if err := f.undo(); err != nil {
		l.cfg.Log.Error("a fault a lesson put on the stack could not be undone", "what", what, "by", by, "err", err)
		return err // still faulted: its timer tries again, as does the page's next ask
	}
	f.timer.Stop()
	delete(l.held.faults, what)
	if !slices.ContainsFunc(slices.Collect(maps.Keys(l.held.faults)), func(w string) bool { return strings.HasPrefix(w, stoppedNode("")) }) {
		l.held.killer = nil // the next stop reads the cluster's state afresh
	}
	l.cfg.Log.Info("a lesson's fault undone", "what", what, "by", by)
	return nil
}

// holding lists what a lesson holds faulted now, sorted.
func (l *Lab) holding() []string {
	l.held.mu.Lock()
	defer l.held.mu.Unlock()
	return slices.Sorted(maps.Keys(l.held.faults))
}

// undoAll undoes every fault a lesson holds whose name passes keep (nil:
// every one), and answers the first error; the others are tried all the
// same.
func (l *Lab) undoAll(by string, keep func(what string) bool) error {
	l.held.mu.Lock()
	defer l.held.mu.Unlock()
	var first error
	for what := range l.held.faults {
		if keep != nil && !keep(what) {
			continue
		}
		if err := l.undoLocked(what, by); err != nil && first == nil {
			first = err
		}
	}
	return first
}
