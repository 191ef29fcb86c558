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
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/locks/retry"
	"github.com/petermattis/goid"
	"github.com/redis/go-redis/v9"
)

// Guard is one lock design. Acquire blocks until owner holds the lock or ctx
// ends, and returns the function that releases it. Passing the owner in (the
// tutorial's uuid:goroutine-id) is what lets a reentrant guard recognise a
// nested acquisition by the same caller.
type Guard interface {
	Acquire(ctx context.Context, owner string) (release func(context.Context) error, err error)
}

// FencedGuard is a Guard that can also hand out a fencing token with each
// acquisition: a number that grows with every new holder.
type FencedGuard interface {
	AcquireFenced(ctx context.Context, owner string) (release func(context.Context) error, token int64, err error)
}

// Method is how one version sells.
type Method struct {
	Name   string
	Guard  Guard // nil: no lock at all (the baseline), unless Atomic
	Nested bool  // take the guard twice, nested, as the tutorial's v7 does
	Atomic bool  // no lock: one Lua script checks and decrements
	// Fence takes the lock with a fencing token (Guard must be a FencedGuard)
	// and writes the stock only if no later holder has written.
	Fence bool
	// Wait is how the guard waits for a taken lock ("poll", "notify"; empty
	// when it does not wait in Redis), for the metrics.
	Wait string
}

// Observer is told of every lock acquisition: the metrics.
type Observer interface {
	// Acquired reports one acquisition of m's guard: how long it took, how
	// many attempts it made (0 for a guard that does not retry), and its
	// error, nil when the lock was obtained.
	Acquired(m Method, took time.Duration, attempts int, err error)
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
	// ErrFenced means the stock refused the write: a holder with a newer
	// fencing token has written since this one took the lock, so this one's
	// lease had expired. Nothing was sold.
	ErrFenced = errors.New("sale: write refused, a newer lock holder has written (fenced)")
)

// Result is one successful sale.
type Result struct {
	Remaining int64
	// ReleaseErr is set when the sale went through but releasing the lock
	// failed, typically because the lease expired while the sale ran: the
	// unit is sold, and the lock did not protect it all the way.
	ReleaseErr error
}

// Client is the part of a Redis client the sale uses.
type Client interface {
	redis.Scripter
	Get(ctx context.Context, key string) *redis.StringCmd
	Set(ctx context.Context, key string, value any, expiration time.Duration) *redis.StatusCmd
}

// Service sells from one stock key.
type Service struct {
	rdb            Client
	key            string
	work           time.Duration
	acquireTimeout time.Duration
	releaseTimeout time.Duration
	observer       Observer
}

// Options configure a Service.
type Options struct {
	Key string // the stock key, inventory:001
	// Work is simulated business time between reading and writing the stock.
	// It widens the read-modify-write window, so a lost lease shows as oversell.
	Work time.Duration
	// AcquireTimeout bounds the wait for the lock (the tutorial waits forever).
	AcquireTimeout time.Duration
	// Observer, when set, is told of every acquisition.
	Observer Observer
}

// New returns a Service over rdb, the stock's Redis.
func New(rdb Client, opts Options) *Service {
	return &Service{
		rdb:            rdb,
		key:            opts.Key,
		work:           opts.Work,
		acquireTimeout: opts.AcquireTimeout,
		releaseTimeout: 5 * time.Second,
		observer:       opts.Observer,
	}
}

// Key is the stock key.
func (s *Service) Key() string { return s.key }

// Sell sells one unit the way m says. It returns ErrSoldOut, ErrLockTimeout,
// ErrStockMissing, ErrStockCorrupt, a context error when the caller went away,
// or the Redis error that stopped it; in none of those cases was stock taken.
func (s *Service) Sell(ctx context.Context, m Method) (Result, error) {
	if m.Atomic {
		return s.sellAtomic(ctx)
	}
	if m.Guard == nil {
		return s.readCheckWrite(ctx, 0)
	}
	owner := uuid.NewString() + ":" + strconv.FormatInt(goid.Get(), 10)
	release, token, err := s.acquire(ctx, m, owner)
	if err != nil {
		return Result{}, err
	}
	if s.observer != nil {
		obtained := time.Now()
		defer func() { s.observer.Held(m, time.Since(obtained)) }() // after the release below
	}
	if m.Nested {
		inner, _, err := s.acquire(ctx, m, owner) // a nested hold keeps the outer token
		if err != nil {
			return Result{}, errors.Join(err, s.release(ctx, release))
		}
		release = chain(inner, release)
	}
	res, err := s.readCheckWrite(ctx, token)
	relErr := s.release(ctx, release)
	if err != nil {
		return Result{}, err
	}
	res.ReleaseErr = relErr
	return res, nil
}

// acquire waits for m's guard at most acquireTimeout; with m.Fence it also
// returns the fencing token (0 otherwise).
func (s *Service) acquire(ctx context.Context, m Method, owner string) (func(context.Context) error, int64, error) {
	actx, cancel := context.WithTimeout(ctx, s.acquireTimeout)
	defer cancel()
	var (
		release  func(context.Context) error
		token    int64
		err      error
		attempts int
		start    = time.Now()
	)
	actx = retry.CountAttempts(actx, &attempts)
	if s.observer != nil {
		defer func() { s.observer.Acquired(m, time.Since(start), attempts, err) }()
	}
	if m.Fence {
		fg, ok := m.Guard.(FencedGuard)
		if !ok {
			return nil, 0, fmt.Errorf("sale: lock %s cannot hand out fencing tokens", m.Name)
		}
		release, token, err = fg.AcquireFenced(actx, owner)
	} else {
		release, err = m.Guard.Acquire(actx, owner)
	}
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, 0, fmt.Errorf("%w (%s): %w", ErrLockTimeout, s.acquireTimeout, err)
		}
		return nil, 0, err
	}
	return release, token, nil
}

// release runs even when the request is gone: a lock left behind blocks every
// other sale until its lease ends (or forever, for v3).
func (s *Service) release(ctx context.Context, release func(context.Context) error) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.releaseTimeout)
	defer cancel()
	return release(rctx)
}

// chain releases inner, then outer, in that order, keeping both errors.
func chain(inner, outer func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		return errors.Join(inner(ctx), outer(ctx))
	}
}

// readCheckWrite is the tutorial's business step: GET, check, wait out the
// business time, SET. It is not atomic; only a guard around it makes it safe.
// With a fencing token (> 0) the write is the fenced script instead of SET:
// refused if a holder with a newer token has written.
func (s *Service) readCheckWrite(ctx context.Context, token int64) (Result, error) {
	n, err := s.Stock(ctx)
	if err != nil {
		return Result{}, err
	}
	if n <= 0 {
		return Result{}, ErrSoldOut
	}
	work := s.work
	if hold := chaos.From(ctx).Hold; hold > 0 {
		work = hold // a slow holder, on request (-chaos)
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
	if token > 0 {
		ok, err := fencedWriteScript.Run(ctx, s.rdb, []string{s.key, s.key + ":fence"}, n-1, token).Int()
		if err != nil {
			return Result{}, fmt.Errorf("sale: fenced write of stock: %w", err)
		}
		if ok == 0 {
			return Result{}, fmt.Errorf("%w: token %d", ErrFenced, token)
		}
		return Result{Remaining: n - 1}, nil
	}
	if err := s.rdb.Set(ctx, s.key, n-1, 0).Err(); err != nil {
		return Result{}, fmt.Errorf("sale: write stock: %w", err)
	}
	return Result{Remaining: n - 1}, nil
}

//go:embed fenced_write.lua
var fencedWriteSrc string

var fencedWriteScript = redis.NewScript(fencedWriteSrc)

//go:embed decrement.lua
var decrementSrc string

var decrementScript = redis.NewScript(decrementSrc)

func (s *Service) sellAtomic(ctx context.Context) (Result, error) {
	n, err := decrementScript.Run(ctx, s.rdb, []string{s.key}).Int64()
	switch {
	case err != nil && isNotInteger(err):
		return Result{}, fmt.Errorf("%w: %s: %w", ErrStockCorrupt, s.key, err)
	case err != nil:
		return Result{}, fmt.Errorf("sale: atomic decrement: %w", err)
	case n == -2:
		return Result{}, fmt.Errorf("%w: %s", ErrStockMissing, s.key)
	case n == -1:
		return Result{}, ErrSoldOut
	}
	return Result{Remaining: n}, nil
}

// isNotInteger reports Redis refusing to DECR a value that is not an integer.
func isNotInteger(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.Contains(rerr.Error(), "not an integer")
}

// Stock reads the stock. A missing key is ErrStockMissing, never zero.
func (s *Service) Stock(ctx context.Context) (int64, error) {
	v, err := s.rdb.Get(ctx, s.key).Result()
	if errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("%w: %s", ErrStockMissing, s.key)
	}
	if err != nil {
		return 0, fmt.Errorf("sale: read stock: %w", err)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s = %q", ErrStockCorrupt, s.key, v)
	}
	return n, nil
}

// SetStock sets the stock (resetting it between runs).
func (s *Service) SetStock(ctx context.Context, n int64) error {
	if n < 0 {
		return fmt.Errorf("sale: stock must not be negative, got %d", n)
	}
	if err := s.rdb.Set(ctx, s.key, n, 0).Err(); err != nil {
		return fmt.Errorf("sale: write stock: %w", err)
	}
	return nil
}
