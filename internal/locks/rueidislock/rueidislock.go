// Package rueidislock is rueidis's rueidislock, one of the Go libraries
// people reach for instead of writing the lock (issue 33), used as its README
// shows it: a Locker of its own client, WithContext to take the lock (its
// context is the lease: cancelled when the lock is lost), its cancel to
// release it. It is here to be judged like the tutorial's versions, not
// rewritten: what it does under the same load and faults is the finding.
//
// What it is: the lock on KeyMajority of 2*KeyMajority-1 keys of one Redis
// node (2 of 3 by default), each taken with SET NX and kept alive by the
// library every half of its validity (a watchdog, like v8's); a waiter does
// not poll: it waits for Redis to tell it, through client-side caching
// (CLIENT TRACKING), that a key it read changed. What it does not give: a
// fencing token, reentrancy.
package rueidislock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/lease"
)

// Options configure a Locker.
type Options struct {
	Key      string        // the lock's name; its keys are rueidislock:I:Key
	TTL      time.Duration // the keys' validity (KeyValidity), renewed every half of it; default 20 s
	Majority int32         // KeyMajority: at least this many of 2*Majority-1 keys; default 2 (the library's)
	Password string        // the node's password, if any
	// Sentinels, when set, are Redis Sentinels (host:port) that name the
	// node as the primary of Master: the library's client asks them, and
	// follows a failover (its sentinel client; the sentinels take the
	// node's password too, as the service's do).
	Sentinels []string
	Master    string
}

// KeyPrefix is the prefix of the lock's keys (the library's default).
const KeyPrefix = "rueidislock"

// Keys are the Redis keys of the lock called key, taken with majority.
func Keys(key string, majority int32) []string {
	if majority <= 0 {
		majority = 2
	}
	keys := make([]string, 2*majority-1)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s:%d:%s", KeyPrefix, i, key)
	}
	return keys
}

// Locker is a rueidislock lock on one Redis node, safe for concurrent use.
// Its client (the library's: RESP3, client-side caching) is made at the
// first acquisition, and again after one that failed to connect: a node
// down at start is an error of each sale until it answers, as for every
// other version, not a replica that cannot start. The client is made in the
// background, once for all the sales that want it meanwhile, each of which
// waits only as long as its own context lets it: the library's dial against
// a frozen node blocks for seconds, and sales queued behind one another's
// dial (a mutex held across it) each took that long, one after another.
type Locker struct {
	addr string
	opts Options

	mu     sync.Mutex
	libs   [2]lib // the library's Locker, and its deaf twin (see deaf)
	closed bool
}

// lib is one of the library's Lockers, made once.
type lib struct {
	l       rueidislock.Locker
	dialing chan struct{} // closed when the dial in flight ends; nil: none
	dialErr error         // the last dial's error
}

// deaf is the index in Locker.libs of the Locker a request that switched
// its wake-up off waits on (chaos.Off.Wake, make mutations' lost-wakeup):
// the library's, on a client of its own whose invalidations are dropped.
// Its waiters are told nothing of a release in another process (another
// replica's, or a key's expiry), so they wait, with the lock free, until
// their deadline; a release on the same Locker still wakes one, as the
// library signals its own waiters without Redis.
const deaf = 1

// New returns a Locker of the node at addr.
func New(addr string, opts Options) *Locker {
	if opts.TTL <= 0 {
		opts.TTL = 20 * time.Second
	}
	if opts.Majority <= 0 {
		opts.Majority = 2
	}
	return &Locker{addr: addr, opts: opts}
}

// locker is the library's Locker (its deaf twin for a request whose
// wake-up is switched off), once made: it starts the dial when none is in
// flight and waits for it until ctx ends.
func (l *Locker) locker(ctx context.Context) (rueidislock.Locker, error) {
	i := 0
	if chaos.From(ctx).Off.Wake { // switched off only by make mutations
		i = deaf
	}
	l.mu.Lock()
	lb := &l.libs[i]
	if lb.l != nil || l.closed {
		defer l.mu.Unlock()
		if l.closed {
			return nil, fmt.Errorf("rueidislock: %s: %w", l.opts.Key, rueidislock.ErrLockerClosed)
		}
		return lb.l, nil
	}
	done := lb.dialing
	if done == nil {
		done = make(chan struct{})
		lb.dialing = done
		go l.dial(done, i)
	}
	l.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, fmt.Errorf("lock not obtained (rueidislock %s, connecting to %s): %w", l.opts.Key, l.addr, context.Cause(ctx))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if lb.l == nil {
		return nil, lb.dialErr
	}
	return lb.l, nil
}

// The client's sizes, smaller than rueidis's defaults (0.5 MiB read and
// write buffers, a ring of 1,024 commands in flight), which are for a
// client that pipelines much: each Locker's client held 1.6 MiB, a tenth of
// a replica's live heap, for commands of a few dozen bytes, a few hundred
// in flight at most (a replica runs at most 256 sales at once). A full ring
// makes the next command wait its turn, it does not fail it.
const (
	ConnBuffer = 64 << 10
	RingScale  = 8 // 2^8 = 256 commands in flight on the connection
)

// dial makes the library's Locker of libs[i] and keeps it, unless Close
// came first.
func (l *Locker) dial(done chan struct{}, i int) {
	co := rueidis.ClientOption{InitAddress: []string{l.addr}, Password: l.opts.Password,
		ReadBufferEachConn: ConnBuffer, WriteBufferEachConn: ConnBuffer, RingScaleEachConn: RingScale}
	if len(l.opts.Sentinels) > 0 {
		// TopologyRefreshInterval: rueidis follows +switch-master only, and
		// one missed leaves it on a demoted primary (its own advice).
		co.InitAddress, co.Sentinel = l.opts.Sentinels, rueidis.SentinelOption{MasterSet: l.opts.Master, Password: l.opts.Password,
			TopologyRefreshInterval: 5 * time.Second}
	}
	// lesson:begin rueidislock rueidislock-1
	opt := rueidislock.LockerOption{ClientOption: co, KeyPrefix: KeyPrefix, KeyValidity: l.opts.TTL, KeyMajority: l.opts.Majority}
	// lesson:end
	if i == deaf {
		// The library hands its client its invalidation handler; this
		// client drops every invalidation instead. Tracking stays on (the
		// library asked for it), so Redis still sends them.
		opt.ClientBuilder = func(o rueidis.ClientOption) (rueidis.Client, error) {
			o.OnInvalidations = func([]rueidis.RedisMessage) {}
			return rueidis.NewClient(o)
		}
	}
	// lesson:begin rueidislock rueidislock-1
	lk, err := rueidislock.NewLocker(opt)
	// lesson:end
	l.mu.Lock()
	defer l.mu.Unlock()
	defer close(done)
	lb := &l.libs[i]
	lb.dialing = nil
	switch {
	case err != nil:
		lb.dialErr = fmt.Errorf("rueidislock: client of %s: %w", l.addr, err)
	case l.closed:
		lk.Close()
	default:
		lb.l = lk
	}
}

// Close closes the library's clients, if any were made (and one still being
// made, once it is).
func (l *Locker) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for i := range l.libs {
		if l.libs[i].l != nil {
			l.libs[i].l.Close()
			l.libs[i].l = nil
		}
	}
}

// Acquire waits for the lock until ctx ends. The library clips a lock's
// validity to the context it was taken with, and ends the lock with it, so
// the wait gets a context of its own, cancelled when ctx ends only while
// nothing is held yet: the lock outlives the acquisition's deadline, as every
// other version's does. The lease's Lost is the library's context.
func (l *Locker) Acquire(ctx context.Context, _ string) (lease.Lease, error) {
	lk, err := l.locker(ctx)
	if err != nil {
		return nil, err
	}
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	var mu sync.Mutex
	held := false
	quit := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !held {
			stop()
		}
	})
	// lesson:begin rueidislock rueidislock-1
	lctx, cancel, err := lk.WithContext(wctx, l.opts.Key)
	// lesson:end
	mu.Lock()
	held = err == nil
	mu.Unlock()
	quit()
	if err != nil {
		stop()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("lock not obtained (rueidislock %s): %w", l.opts.Key, context.Cause(ctx))
		}
		return nil, fmt.Errorf("rueidislock: %s: %w", l.opts.Key, err)
	}
	release := func(context.Context) error {
		defer stop()
		lost := lctx.Err() != nil
		// lesson:begin rueidislock rueidislock-1
		cancel() // the library deletes the keys it holds before it returns
		// lesson:end
		if lost {
			return fmt.Errorf("rueidislock: release %s: %w", l.opts.Key, lease.ErrNotHeld)
		}
		return nil
	}
	return lease.New(release, 0, lctx.Done()), nil
}
