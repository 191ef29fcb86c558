// Package sale is the business step every version protects: sell one unit of
// stock held in Redis. Under a guard it is the tutorial's read-check-write
// (GET, compare, SET), a read-modify-write that oversells whenever two callers
// overlap, which is exactly what makes the locks' differences visible.
package sale

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/redisconn"
	"github.com/locklab/locklab/internal/step"
	"github.com/petermattis/goid"
	"github.com/redis/go-redis/v9"
)

// Locker is one lock version, its waiting composed (package versions builds
// them): Acquire waits until owner holds the lock or ctx ends, and returns the
// lease. Passing the owner in (the tutorial's uuid:goroutine-id) is what lets
// a reentrant lock recognise a nested acquisition by the same caller.
type Locker interface {
	Acquire(ctx context.Context, owner string) (lease.Lease, error)
}

// Method is how one version sells.
type Method struct {
	Name   string
	Lock   Locker // nil: no lock at all (the baseline), unless Atomic
	Nested bool   // take the lock twice, nested, as the tutorial's v7 does
	Atomic bool   // no lock: one Lua script checks and decrements
	// Fence names the token domain when Lock hands out fencing tokens (""
	// when it does not): the counter its tokens come from. The stock keeps
	// the newest holder per domain, and tokens of two domains are never
	// compared: two counters' numbers say nothing about each other.
	Fence string
	// Wait is how Lock waits for a taken lock ("poll", "notify", "handoff"; empty
	// when it does not wait in Redis), for the metrics.
	Wait string
	// Rides says that Lock's acquisition can carry the sale's first read in
	// its last round trip (a hand-off's claim: lease.Rider), and its release
	// the sale's write in its first (redisconn.Ahead; newHold says when).
	// Only then is a rider made: every other sale reads and writes for
	// itself and allocates nothing.
	Rides bool
	// LeaseHook says that Lock takes its lease per acquisition from the
	// request's fault hooks when they set one (chaos.Faults.Lease).
	LeaseHook bool
}

// Observer is told of every lock acquisition and hold: the metrics.
type Observer interface {
	// Acquired reports one acquisition of m's lock: how long it took, and
	// its error, nil when the lock was obtained.
	Acquired(m Method, took time.Duration, err error)
	// Held reports how long one sale held m's lock: from the moment it was
	// obtained to the moment its release returned. Every other sale waits
	// that long, so it is what bounds a locked sale's throughput.
	Held(m Method, held time.Duration)
}

var (
	// ErrSoldOut means the stock was 0: nothing was sold.
	ErrSoldOut = errors.New("sale: sold out")
	// ErrLockTimeout means the lock was not obtained before the acquire
	// deadline: nothing was sold, the caller may retry.
	ErrLockTimeout = errors.New("sale: lock not obtained in time")
	// ErrStockMissing means the stock key does not exist. It is never
	// reported as sold out: an unset key is a deployment error, not zero stock.
	ErrStockMissing = errors.New("sale: stock key is not set")
	// ErrStockCorrupt means the stock key does not hold a whole number.
	ErrStockCorrupt = errors.New("sale: stock is not an integer")
	// ErrFenced means the stock refused this holder's read or write: a
	// holder with a newer fencing token (or the same token, another owner)
	// has touched the stock since, so this one's lease had expired. Nothing
	// was sold.
	ErrFenced = errors.New("sale: refused by the stock, a newer lock holder has touched it (fenced)")
	// ErrNoToken means the sale asked for fencing and its lock handed out
	// no token: it was refused before it touched the stock, never sold
	// unfenced (a fenced sale's write always carries a token). Nothing was
	// sold. A lock that can issue tokens always does when asked; this is
	// the check behind that promise (issue 44: a hand-off once gave a fenced
	// waiter the releaser's "no token").
	ErrNoToken = errors.New("sale: fencing asked for, but the lock handed out no token: nothing sold")
	// ErrLeaseLost means the lock was known lost before the write (v8's
	// watchdog found its lease gone), so the sale stopped: nothing was sold.
	ErrLeaseLost = errors.New("sale: lock lost before the write, nothing sold")
	// ErrIndeterminate means the stock's write was sent and its reply lost
	// (a timeout, a broken connection): the unit may or may not be sold. It is
	// the one error after which stock may have been taken.
	ErrIndeterminate = errors.New("sale: the stock write's reply was lost: the unit may or may not be sold")
)

// Result is one sale: what remains, and its trace.
type Result struct {
	Remaining int64
	// Trace is what the sale did, whatever its error: Sell sets it on every
	// return.
	Trace Trace
	// ReleaseErr is set when the sale went through but releasing the lock
	// failed: the unit is sold. When it wraps lease.ErrNotHeld the lease
	// expired while the sale ran, and the lock did not protect it all the way.
	ReleaseErr error
}

// Trace is what one sale did to the lock and the stock, with this process's
// wall-clock time of each step: the raw material of the history, which costs
// no Redis round trip. A zero time is a step not taken.
type Trace struct {
	Owner    string    `json:"owner,omitempty"`
	Token    int64     `json:"token,omitempty"`
	Obtained time.Time `json:"obtained,omitzero"` // the lock obtained
	Read     Step      `json:"read,omitzero"`     // the stock read
	Written  Step      `json:"written,omitzero"`  // the stock written
	// Refused is set when fencing refused the read or the write.
	Refused bool `json:"refused,omitempty"`
	// Releasing is when the release was sent: the end of the time this
	// holder believed it held the lock. Released is when it returned.
	Releasing time.Time `json:"releasing,omitzero"`
	Released  time.Time `json:"released,omitzero"`
	// NotHeld is set when the release found the lock no longer this owner's.
	NotHeld bool `json:"not_held,omitempty"`
	// ReleaseError is why the release failed ("" when it did not): a node
	// that could not be reached keeps the key until its lease runs out.
	ReleaseError string `json:"release_error,omitempty"`
}

// Step is one access to the stock: when, and the value read or written.
type Step struct {
	At    time.Time `json:"at"`
	Value int64     `json:"value"`
}

// Client is the part of a Redis client the sale uses.
type Client interface {
	redis.Scripter
	redisconn.Pipeliner
	Get(ctx context.Context, key string) *redis.StringCmd
	Set(ctx context.Context, key string, value any, expiration time.Duration) *redis.StatusCmd
	Del(ctx context.Context, keys ...string) *redis.IntCmd // a fence switched off: its own domain's key
}

// ReleaseTimeout bounds a release: it runs even when the request is gone, so
// it needs its own deadline.
const ReleaseTimeout = 5 * time.Second

// Service sells from one stock key.
type Service struct {
	rdb            Client
	key            string
	work           time.Duration
	acquireTimeout time.Duration
	releaseTimeout time.Duration
	replicaAck     int
	observer       Observer
}

// Options configure a Service.
type Options struct {
	Key string // the stock key; default api.DefaultStockKey
	// Work is simulated business time between reading and writing the stock.
	// It widens the read-modify-write window, so a lost lease shows as oversell.
	Work time.Duration
	// AcquireTimeout bounds the wait for the lock (the tutorial waits forever).
	AcquireTimeout time.Duration
	// Observer, when set, is told of every acquisition and hold.
	Observer Observer
	// ReplicaAck is how many replicas of the stock's node must acknowledge
	// a sale's write before it is reported sold (0: none, Redis's
	// asynchronous replication; the request's replica_ack hook may ask for
	// more). A sale whose write is not acknowledged in time is
	// ErrIndeterminate: a failover could lose it, so it is never a 200.
	ReplicaAck int
}

// New returns a Service over rdb, the stock's Redis. Zero options are the
// service's defaults: api.DefaultStockKey, no business time, a 10 s acquire
// timeout.
func New(rdb Client, opts Options) *Service {
	if opts.Key == "" {
		opts.Key = api.DefaultStockKey
	}
	if opts.AcquireTimeout <= 0 {
		opts.AcquireTimeout = 10 * time.Second
	}
	return &Service{
		rdb:            rdb,
		key:            opts.Key,
		work:           opts.Work,
		acquireTimeout: opts.AcquireTimeout,
		releaseTimeout: ReleaseTimeout,
		replicaAck:     opts.ReplicaAck,
		observer:       opts.Observer,
	}
}

// Key is the stock key.
func (s *Service) Key() string { return s.key }

// Sell sells one unit the way m says. It returns ErrSoldOut, ErrLockTimeout,
// ErrStockMissing, ErrStockCorrupt, ErrFenced, ErrNoToken, ErrLeaseLost, a
// context error when the caller went away while it waited for the lock, or
// the Redis error that stopped it; in none of those cases was stock taken.
// The one exception is ErrIndeterminate: the write was sent and its reply
// lost.
func (s *Service) Sell(ctx context.Context, m Method) (Result, error) {
	var tr Trace
	res, err := s.sell(ctx, m, &tr)
	res.Trace = tr
	return res, err
}

func (s *Service) sell(ctx context.Context, m Method, tr *Trace) (res Result, err error) {
	if m.Atomic {
		return s.sellAtomic(ctx, tr)
	}
	if m.Lock == nil {
		step.Phase(ctx, step.Stock)
		return s.readCheckWrite(ctx, nil, nil, tr, nil)
	}
	tr.Owner = uuid.NewString() + ":" + strconv.FormatInt(goid.Get(), 10)
	step.Owner(ctx, tr.Owner)
	step.Phase(ctx, step.Acquire)
	first := s.rider(ctx, m, tr.Owner)
	l, err := s.acquire(first.context(ctx), m, tr.Owner)
	if err != nil {
		return Result{}, err
	}
	tr.Obtained, tr.Token = time.Now(), l.Token()
	if sent, ok := first.rode(); ok {
		tr.Obtained = sent // the hold began with the claim its read rode with
	}
	// From here on the sale is a holder: it finishes whatever the caller
	// does (a client gone, a replica shutting down), so that it never stops
	// between its write and its release, and the write's outcome is known.
	// Everything it still does is bounded: the business time, Redis's own
	// timeouts, the release's.
	ctx = context.WithoutCancel(ctx)
	h := s.newHold(ctx, l, tr, first)
	// Deferred, so that even a panic releases the lock (v1's mutex too); a
	// write that rode ahead of the release released it already.
	defer func() {
		relErr := h.release(ctx, nil)
		if s.observer != nil {
			s.observer.Held(m, tr.Released.Sub(tr.Obtained))
		}
		if err == nil {
			res.ReleaseErr = relErr
		} else if relErr != nil {
			err = errors.Join(err, relErr)
		}
	}()
	if m.Nested {
		inner, err := s.acquire(ctx, m, tr.Owner)
		if err != nil {
			return Result{}, err
		}
		h.l = nested(inner, l)
	}
	step.Phase(ctx, step.Stock)
	f, err := s.fence(ctx, m, l.Token(), tr.Owner)
	if err != nil {
		return Result{}, err
	}
	if f != nil && chaos.From(ctx).Off.Fence {
		defer s.rdb.Del(context.WithoutCancel(ctx), f.key) // its own domain: nobody else's
	}
	return s.readCheckWrite(ctx, h, f, tr, first)
}

// acquire waits for m's lock at most acquireTimeout (a stepped sale: of its
// running time, at most the lesson's bound, step.WaitContext).
func (s *Service) acquire(ctx context.Context, m Method, owner string) (lease.Lease, error) {
	if chaos.From(ctx).Off.Lock { // the lock switched off: it grants at once
		return s.granted(ctx, m, owner), nil
	}
	bound := step.WaitBound(ctx, s.acquireTimeout)
	actx, cancel := step.WaitContext(ctx, bound)
	defer cancel()
	start := time.Now()
	l, err := m.Lock.Acquire(actx, owner)
	if s.observer != nil {
		s.observer.Acquired(m, time.Since(start), err)
	}
	if err != nil && ctx.Err() == nil && actx.Err() != nil && errors.Is(err, context.DeadlineExceeded) && !netFailure(err) {
		return nil, fmt.Errorf("%w (%s): %w", ErrLockTimeout, bound, err)
	}
	return l, err
}

// granted is the lease of a lock switched off (chaos.Off.Lock, make
// mutations): held at once, with no token. The lock is still asked for in
// the background (the cells watch it to know when to act); the release
// waits for that answer and releases what it got.
func (s *Service) granted(ctx context.Context, m Method, owner string) lease.Lease {
	got := make(chan lease.Lease, 1)
	go func() {
		// Answered within half the release's own bound, so that the
		// release always knows what it has to release: no lock is left
		// to a goroutine after the sale (and into the next cell).
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(s.acquireTimeout, s.releaseTimeout/2))
		defer cancel()
		l, err := m.Lock.Acquire(actx, owner)
		if err != nil {
			l = nil
		}
		got <- l
	}()
	return lease.New(func(ctx context.Context) error {
		select {
		case l := <-got:
			if l != nil {
				return l.Release(ctx)
			}
			return nil
		case <-ctx.Done(): // still asking: release it once answered
			go func() {
				if l := <-got; l != nil {
					rctx, cancel := context.WithTimeout(context.Background(), s.releaseTimeout)
					defer cancel()
					_ = l.Release(rctx) // best effort: its lease ends it otherwise
				}
			}()
			return ctx.Err()
		}
	}, 0, nil)
}

// netFailure reports whether err is the network failing (a dial, a lookup, a
// read). A dial's or a lookup's timeout matches context.DeadlineExceeded, but
// it is Redis not reached, not a lock held by others until the deadline
// (seen on Compose: looking up the name of a stopped node took longer than
// the dial timeout, and the sale answered lock_timeout).
func netFailure(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) || errors.As(err, &dns)
}

// release runs even when the request is gone: a lock left behind blocks every
// other sale until its lease ends (or forever, for v3).
func (s *Service) release(ctx context.Context, l lease.Lease, tr *Trace) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), step.Timeout(ctx, s.releaseTimeout))
	defer cancel()
	stop := step.Cancelled(ctx, func() { time.AfterFunc(s.releaseTimeout, cancel) })
	defer stop()
	step.Phase(ctx, step.Release)
	tr.Releasing = time.Now()
	err := l.Release(rctx)
	tr.Released, tr.NotHeld = time.Now(), errors.Is(err, lease.ErrNotHeld)
	if err != nil {
		tr.ReleaseError = strings.ReplaceAll(err.Error(), "\n", "; ")
	}
	return err
}

// nested is the outer lease, releasing inner first, then outer, keeping both
// errors. The outer hold's token and lost signal stand for both.
func nested(inner, outer lease.Lease) lease.Lease {
	return lease.WithRelease(outer, func(ctx context.Context) error {
		return errors.Join(inner.Release(ctx), outer.Release(ctx))
	})
}

// readCheckWrite is the tutorial's business step: GET, check, wait out the
// business time, SET. It is not atomic; only a lock around it makes it safe.
// h is the hold it runs under (nil: no lock). A lease known lost stops it
// before the write. With fencing, the read and the write are both the fenced
// script: refused once a newer holder has touched the stock.
func (s *Service) readCheckWrite(ctx context.Context, h *hold, f *fencing, tr *Trace, first *firstRead) (Result, error) {
	// lesson:begin none
	n, err := s.read(ctx, f, first)
	tr.Refused = errors.Is(err, ErrFenced)
	if err != nil {
		return Result{}, err
	}
	tr.Read = Step{At: time.Now(), Value: n}
	if err := step.Stop(ctx, fmt.Sprintf("check: stock %d > 0", n)); err != nil {
		return Result{}, err
	}
	if n <= 0 {
		step.Done(ctx, "no: sold out")
		return Result{}, ErrSoldOut
	}
	step.Done(ctx, fmt.Sprintf("yes: write %d", n-1))
	// lesson:end
	work := s.work
	if hold := chaos.From(ctx).Hold; hold > 0 {
		work = hold // a slow holder, on request (-chaos)
	}
	if err := step.Stop(ctx, "business work: "+work.String()); err != nil {
		return Result{}, err
	}
	if work > 0 {
		t := time.NewTimer(work)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return Result{}, context.Cause(ctx)
		case <-t.C:
		}
	}
	step.Done(ctx, "done")
	if l := h.lease(); l != nil && lease.IsLost(l) && !chaos.From(ctx).Off.LeaseCheck {
		return Result{}, ErrLeaseLost
	}
	chaos.BeforeWrite(ctx) // after the last check: a pause here goes unnoticed
	// lesson:begin none
	at, err := s.write(ctx, h, n-1, f)
	// lesson:end
	tr.Refused = errors.Is(err, ErrFenced)
	if err != nil {
		return Result{}, err
	}
	tr.Written = Step{At: at, Value: n - 1}
	if err := s.replicated(ctx); err != nil {
		return Result{}, err
	}
	return Result{Remaining: n - 1}, nil
}

// read reads the stock: a GET, or with fencing the fenced script; or the
// reply of the one that rode with the lock's claim (first), when it did.
func (s *Service) read(ctx context.Context, f *fencing, first *firstRead) (int64, error) {
	if n, ok, err := first.reply(f); ok {
		return n, err
	}
	if f == nil {
		return s.Stock(ctx)
	}
	return s.fencedRead(fencedScript.Run(ctx, s.rdb, []string{s.key, f.key}, f.token, f.owner, ""), f)
}

//go:embed sale.go
var saleSrc string

// Source is this file as the service is built from it: the lab's lesson
// for no lock is its read-check-write, marked here (lesson:begin none).
func Source() string { return saleSrc }
