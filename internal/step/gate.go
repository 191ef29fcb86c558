package step

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/petermattis/goid"
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
