// Package watchdog is the tutorial's v8: v7's reentrant lock plus a watchdog
// that renews the lease every TTL/3 for as long as its owner holds the lock,
// so slow work no longer loses it (Redisson does the same).
//
// Unlike the tutorial's watchdog, this one stops when the owner releases (its
// goroutine ends: none leak), and a nested acquisition shares the outer one's
// watchdog instead of starting another. When a renewal finds the lease gone,
// or renewals have failed for longer than the lease, the watchdog closes the
// lease's Lost channel, so a sale that checks it stops before it writes
// (rueidislock and Consul hand their holders the same signal).
//
// What it still gets wrong: the lock lives on one Redis node, a single point
// of failure; and a frozen process freezes its watchdog too, so a pause longer
// than the TTL still lets a second holder in, and the frozen holder's check of
// Lost, made on waking, sees its own stale belief (fencing tokens address that).
package watchdog

import (
	"context"
	_ "embed"
	"log/slog"
	"sync"
	"time"

	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/handoff"
	reentrant "github.com/locklab/locklab/internal/locks/v7_reentrant"
	"github.com/redis/go-redis/v9"
)

//go:embed renew.lua
var renewSrc string

var renewScript = redis.NewScript(renewSrc)

// Observer is told of every renewal and every lease a watchdog found lost:
// the metrics.
type Observer interface {
	Renewed()
	LeaseLost()
}

// Locker is a v8 lock, safe for concurrent use.
type Locker struct {
	inner *reentrant.Locker
	rdb   redis.Scripter
	log   *slog.Logger
	obs   Observer

	mu   sync.Mutex
	dogs map[string]*dog // by owner: one watchdog however deeply nested
}

// dog renews one owner's lease until stopped.
type dog struct {
	holds  int
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine has ended
	lost   chan struct{} // closed when the lease is known lost
}

// New returns a Locker with v7's options; the watchdog renews every opts.TTL/3.
// log and obs may be nil.
func New(rdb redis.Scripter, opts reentrant.Options, log *slog.Logger, obs Observer) *Locker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if obs == nil {
		obs = nopObserver{}
	}
	return &Locker{inner: reentrant.New(rdb, opts), rdb: rdb, log: log, obs: obs, dogs: make(map[string]*dog)}
}

type nopObserver struct{}

func (nopObserver) Renewed()   {}
func (nopObserver) LeaseLost() {}

// TryAcquire takes one hold as v7 does and, on the owner's outermost hold,
// starts the watchdog. The lease's release stops the watchdog on the
// outermost release, before the lock is released, and waits for it to end,
// so the watchdog can never renew a lock its owner has let go. Every hold of
// one owner shares the watchdog's Lost channel.
func (l *Locker) TryAcquire(ctx context.Context, owner string) (lease.Lease, error) {
	inner, err := l.inner.TryAcquire(ctx, owner)
	if err != nil {
		return nil, err
	}
	return l.watched(ctx, owner, inner), nil
}

// TryOrQueue is v7's attempt that queues when the lock is taken (-wait
// handoff), watched as TryAcquire's hold is.
func (l *Locker) TryOrQueue(ctx context.Context, owner string, w handoff.Waiter) (lease.Lease, error) {
	inner, err := l.inner.TryOrQueue(ctx, owner, w)
	if err != nil {
		return nil, err
	}
	return l.watched(ctx, owner, inner), nil
}

// Granted is the lease of the hold a release handed owner, with its token:
// its watchdog starts now.
func (l *Locker) Granted(ctx context.Context, owner string, token int64) lease.Lease {
	return l.watched(ctx, owner, l.inner.Granted(ctx, owner, token))
}

// Leave is v7's: a hold handed over while owner was leaving had no watchdog.
func (l *Locker) Leave(ctx context.Context, owner string) error { return l.inner.Leave(ctx, owner) }

// watched returns inner, a hold of owner's, with the watchdog renewing it.
func (l *Locker) watched(ctx context.Context, owner string, inner lease.Lease) lease.Lease {
	l.mu.Lock()
	d := l.dogs[owner]
	if d == nil {
		d = l.start(ctx, owner)
		l.dogs[owner] = d
	}
	d.holds++
	l.mu.Unlock()

	release := func(ctx context.Context) error {
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
		return inner.Release(ctx)
	}
	return lease.New(release, inner.Token(), d.lost)
}

func (l *Locker) start(ctx context.Context, owner string) *dog {
	// The watchdog outlives the request's deadline (the lease must be renewed
	// for as long as the sale runs) but not its release: it has its own cancel.
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d := &dog{cancel: cancel, done: make(chan struct{}), lost: make(chan struct{})}
	go l.run(ctx, owner, d)
	return d
}

func (l *Locker) run(ctx context.Context, owner string, d *dog) {
	defer close(d.done)
	ttl := l.inner.TTL()
	tick := time.NewTicker(ttl / 3)
	defer tick.Stop()
	// validUntil is when the lease runs out if no renewal succeeds: counted
	// from when the last successful renewal was sent, so never late.
	validUntil := time.Now().Add(ttl)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		sent := time.Now()
		n, err := renewScript.Run(ctx, l.rdb, []string{l.inner.Key()}, owner, ttl.Milliseconds()).Int()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && time.Now().Before(validUntil):
			// Keep trying: the lease may survive a brief outage.
			l.log.Warn("watchdog renewal failed", "key", l.inner.Key(), "owner", owner, "err", err)
		case err != nil:
			l.lose(owner, d, "renewals failed for longer than the lease", err)
			return
		case n == 0:
			l.lose(owner, d, "the lease is gone", nil)
			return
		default:
			validUntil = sent.Add(ttl)
			l.obs.Renewed()
		}
	}
}

// lose reports the lease lost: counted and logged first, then Lost closed,
// so that whoever sees Lost closed also sees the count (make stress caught a
// reader in between).
func (l *Locker) lose(owner string, d *dog, why string, err error) {
	l.obs.LeaseLost()
	l.log.Warn("watchdog lost the lease: "+why, "key", l.inner.Key(), "owner", owner, "err", err)
	close(d.lost)
}
