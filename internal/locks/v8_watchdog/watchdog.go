// Package watchdog is the tutorial's v8: v7's reentrant lock plus a watchdog
// that renews the lease every TTL/3 for as long as its owner holds the lock,
// so slow work no longer loses it (Redisson does the same).
//
// Unlike the tutorial's watchdog, this one stops when the owner releases (its
// goroutine ends: none leak), and a nested acquisition shares the outer one's
// watchdog instead of starting another.
//
// What it still gets wrong: the lock lives on one Redis node, a single point
// of failure; and a frozen process freezes its watchdog too, so a pause longer
// than the TTL still lets a second holder in (fencing tokens address that).
package watchdog

import (
	"context"
	_ "embed"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	reentrant "github.com/locklab/locklab/internal/locks/v7_reentrant"
	"github.com/redis/go-redis/v9"
)

//go:embed renew.lua
var renewSrc string

var renewScript = redis.NewScript(renewSrc)

// Locker is a v8 lock, safe for concurrent use.
type Locker struct {
	inner *reentrant.Locker
	rdb   redis.Scripter
	log   *slog.Logger

	mu   sync.Mutex
	dogs map[string]*dog // by owner: one watchdog however deeply nested

	renewals, lost atomic.Int64 // for the metrics
}

// Renewals counts the leases the watchdogs have renewed.
func (l *Locker) Renewals() int64 { return l.renewals.Load() }

// Lost counts the leases a watchdog found gone: the owner was still working
// when the lock expired (a pause longer than the lease, or a Redis outage).
func (l *Locker) Lost() int64 { return l.lost.Load() }

// dog renews one owner's lease until stopped.
type dog struct {
	holds  int
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a Locker with v7's options; the watchdog renews every opts.TTL/3.
func New(rdb redis.Scripter, opts reentrant.Options, log *slog.Logger) *Locker {
	return &Locker{
		inner: reentrant.New(rdb, opts),
		rdb:   rdb,
		log:   log,
		dogs:  make(map[string]*dog),
	}
}

// Acquire takes one hold as v7 does and, on the owner's outermost hold, starts
// the watchdog. The returned release stops the watchdog on the outermost
// release, before the lock is released, and waits for it to end, so the
// watchdog can never renew a lock its owner has let go.
func (l *Locker) Acquire(ctx context.Context, owner string) (func(context.Context) error, error) {
	release, err := l.inner.Acquire(ctx, owner)
	if err != nil {
		return nil, err
	}
	return l.watch(ctx, owner, release), nil
}

// AcquireFenced is Acquire with v7's fencing token. The watchdog keeps the
// lease alive while the process runs; the token protects the storage when the
// whole process, watchdog included, is frozen past the lease.
func (l *Locker) AcquireFenced(ctx context.Context, owner string) (func(context.Context) error, int64, error) {
	release, token, err := l.inner.AcquireFenced(ctx, owner)
	if err != nil {
		return nil, 0, err
	}
	return l.watch(ctx, owner, release), token, nil
}

// watch starts the owner's watchdog on its outermost hold and returns the
// release that stops it.
func (l *Locker) watch(ctx context.Context, owner string, release func(context.Context) error) func(context.Context) error {
	l.mu.Lock()
	d := l.dogs[owner]
	if d == nil {
		d = l.start(ctx, owner)
		l.dogs[owner] = d
	}
	d.holds++
	l.mu.Unlock()

	return func(ctx context.Context) error {
		l.mu.Lock()
		d.holds--
		last := d.holds == 0
		if last {
			delete(l.dogs, owner)
		}
		l.mu.Unlock()
		if last {
			d.cancel()
			<-d.done
		}
		return release(ctx)
	}
}

// Close stops every watchdog still running (a shutdown with holds outstanding).
// The leases then expire on their own.
func (l *Locker) Close() {
	l.mu.Lock()
	dogs := l.dogs
	l.dogs = make(map[string]*dog)
	l.mu.Unlock()
	for _, d := range dogs {
		d.cancel()
		<-d.done
	}
}

func (l *Locker) start(ctx context.Context, owner string) *dog {
	// The watchdog outlives the request's deadline (the lease must be renewed
	// for as long as the sale runs) but not its release: it has its own cancel.
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d := &dog{cancel: cancel, done: make(chan struct{})}
	go l.run(ctx, owner, d.done)
	return d
}

func (l *Locker) run(ctx context.Context, owner string, done chan<- struct{}) {
	defer close(done)
	ttl := l.inner.TTL()
	tick := time.NewTicker(ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n, err := renewScript.Run(ctx, l.rdb, []string{l.inner.Key()}, owner, ttl.Milliseconds()).Int()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			// Keep trying: the lease may survive a brief outage; if it does
			// not, the owner's release reports the loss.
			l.log.Warn("watchdog renewal failed", "key", l.inner.Key(), "owner", owner, "err", err)
		case n == 0:
			l.lost.Add(1)
			l.log.Warn("watchdog found the lease lost", "key", l.inner.Key(), "owner", owner)
			return
		default:
			l.renewals.Add(1)
		}
	}
}
