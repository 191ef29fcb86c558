// Package watchdog is the tutorial's v8: v7's reentrant lock plus a watchdog
// that renews the lease every TTL/3 for as long as its owner holds the lock,
// so slow work no longer loses it (Redisson does the same).
//
// Unlike the tutorial's watchdog, this one stops when the owner releases (its
// goroutine ends: none leak), and a nested acquisition shares the outer one's
// watchdog instead of starting another. The lease's Lost channel closes when
// a renewal finds the lease gone, or at the lease's own deadline when no
// renewal succeeded in time: counted from the sending of the last acquire,
// claim or renewal that succeeded, less a drift margin (as Redlock counts
// validity), by a timer rather than at the next renewal tick. So a sale that
// checks it stops before it writes (rueidislock and Consul hand their holders
// the same signal).
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
	"github.com/locklab/locklab/internal/step"
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
	holds    int
	cancel   context.CancelFunc
	done     chan struct{}   // closed when the goroutine has ended
	deadline *lease.Deadline // the lease's validity: Lost closes when it passes
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
	sent := time.Now()
	inner, err := l.inner.TryAcquire(ctx, owner)
	if err != nil {
		return nil, err
	}
	return l.watched(ctx, owner, inner, step.Sent(ctx, sent)), nil
}

// TryOrQueue is v7's attempt that queues when the lock is taken (-wait
// handoff), watched as TryAcquire's hold is.
func (l *Locker) TryOrQueue(ctx context.Context, owner string, w handoff.Waiter) (lease.Lease, error) {
	sent := time.Now()
	inner, err := l.inner.TryOrQueue(ctx, owner, w)
	if err != nil {
		return nil, err
	}
	return l.watched(ctx, owner, inner, step.Sent(ctx, sent)), nil
}

// Granted claims the hold a release handed owner, with its token (v7's
// claim): its lease, and its watchdog, start now.
func (l *Locker) Granted(ctx context.Context, owner string, token int64) (lease.Lease, error) {
	sent := time.Now()
	inner, err := l.inner.Granted(ctx, owner, token)
	if err != nil {
		return nil, err
	}
	return l.watched(ctx, owner, inner, step.Sent(ctx, sent)), nil
}

// Leave is v7's: a hold handed over while owner was leaving had no watchdog.
func (l *Locker) Leave(ctx context.Context, owner string) error { return l.inner.Leave(ctx, owner) }

// watched returns inner, a hold of owner's whose acquiring command was sent
// at sent, with the watchdog renewing it. A nested hold renewed the lease
// too (v7's acquire sets it again), so it moves the deadline on. (A stepped
// sale's command is sent when the learner lets it go, not when it reached
// the gate: step.Sent.)
func (l *Locker) watched(ctx context.Context, owner string, inner lease.Lease, sent time.Time) lease.Lease {
	until := lease.ValidUntil(sent, l.inner.TTL())
	l.mu.Lock()
	d := l.dogs[owner]
	if d == nil {
		d = l.start(ctx, owner, until)
		l.dogs[owner] = d
	} else {
		d.deadline.Extend(until)
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
			d.deadline.Stop()
		}
		return inner.Release(ctx)
	}
	return lease.Timed(release, inner.Token(), d.deadline)
}

func (l *Locker) start(ctx context.Context, owner string, until time.Time) *dog {
	// The watchdog outlives the request's deadline (the lease must be renewed
	// for as long as the sale runs) but not its release: it has its own cancel.
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d := &dog{cancel: cancel, done: make(chan struct{})}
	d.deadline = lease.NewDeadline(until, l.obs.LeaseLost)
	go l.run(ctx, owner, d)
	return d
}

func (l *Locker) run(ctx context.Context, owner string, d *dog) {
	defer close(d.done)
	// lesson:begin v8
	ttl := l.inner.TTL()
	tick := time.NewTicker(ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.deadline.Lost():
			l.log.Warn("watchdog lost the lease: no renewal succeeded before its deadline", "key", l.inner.Key(), "owner", owner)
			return
		case <-tick.C:
		}
		sent := time.Now()
		n, err := renewScript.Run(ctx, l.rdb, []string{l.inner.Key()}, owner, ttl.Milliseconds()).Int()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			// Keep trying until the deadline: the lease may survive a brief
			// outage. The deadline's timer says when it did not.
			l.log.Warn("watchdog renewal failed", "key", l.inner.Key(), "owner", owner, "err", err)
		case n == 0:
			l.log.Warn("watchdog lost the lease: the lease is gone", "key", l.inner.Key(), "owner", owner)
			d.deadline.Lose()
			return
		case !d.deadline.Extend(lease.ValidUntil(sent, ttl)):
			// Renewed after the deadline had passed: the holder may have been
			// told it is lost already, so it stays lost.
		default:
			l.obs.Renewed()
		}
	}
	// lesson:end
}
