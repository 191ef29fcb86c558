// Package redlock is the Redlock algorithm through go-redsync: the lock is
// taken on N independent Redis masters and held when a majority (N/2+1)
// granted it within the lease, so one node's failure neither stops locking nor
// loses the lock.
//
// Unlike the tutorial's version, the pools are built once (it built three
// clients per request, the slowness it reports), a failed acquisition never
// falls through to the sale, and release errors are reported.
//
// The lease's Lost channel closes when its validity ends (the lease less the
// time the acquisition took and a drift margin, as the Redlock algorithm
// counts it), so a sale that checks before it writes does not write on a
// lease that ran out.
//
// What it still gets wrong (seed 003, Kleppmann's critique): it relies on
// timing. A holder frozen longer than the lease (a GC pause, SIGSTOP) after
// that check wakes up believing it still holds a lock that another owner now
// holds.
package redlock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/fence"
	"github.com/locklab/locklab/internal/step"
	"github.com/redis/go-redis/v9"
)

//go:embed raise.lua
var raiseSrc string

// raiseScript writes a token back to a node whose fencing counter is behind.
var raiseScript = redis.NewScript(raiseSrc)

// ErrNoQuorum means too many nodes failed (not merely refused: they could not
// be reached) for a majority to be possible, so waiting would be pointless.
var ErrNoQuorum = errors.New("redlock: quorum unreachable")

// Options configure a Locker. The zero value is a 20 s lease on the key "lock".
type Options struct {
	Key string        // the lock key, the same on every node; default "lock"
	TTL time.Duration // lease; default 20 s
	// Fence hands out a fencing token with each acquisition: the highest
	// INCR of a counter over a majority of the nodes (see TryAcquire).
	Fence bool
}

// Locker is a Redlock over the given nodes, safe for concurrent use.
type Locker struct {
	rs      *redsync.Redsync
	clients []redis.UniversalClient
	nodes   int
	quorum  int
	opts    Options
}

// New returns a Locker over the independent nodes (the clients are used as they
// are; redsync talks to each through its go-redis adapter).
func New(nodes []redis.UniversalClient, opts Options) *Locker {
	if opts.Key == "" {
		opts.Key = "lock"
	}
	if opts.TTL <= 0 {
		opts.TTL = 20 * time.Second
	}
	pools := make([]redsyncredis.Pool, len(nodes))
	for i, c := range nodes {
		pools[i] = goredis.NewPool(c)
	}
	return &Locker{rs: redsync.New(pools...), clients: nodes, nodes: len(nodes), quorum: len(nodes)/2 + 1, opts: opts}
}

// TryAcquire makes one Redlock attempt: a lease when a majority granted the
// lock, lease.ErrTaken when it is taken (or a minority of nodes failed), and
// ErrNoQuorum when too many nodes failed for a majority to be possible.
//
// redsync's own retry loop is not used: it reports every failure as ErrFailed
// (lock taken, nodes down and deadline alike) and its defaults give up after
// 32 tries, failing waiting requests instead of serving them. One try per
// attempt keeps the per-node errors, so a dead majority fails at once while a
// busy lock is waited for (package retry) until the caller's deadline.
//
// With Fence, once the lock is held it INCRs a counter on every node, takes
// the highest value as the token, and raises the counters of the nodes that
// answered less to it (raise.lua, which never lowers one): a majority then
// holds at least the token, and the next holder's majority, which overlaps
// it, INCRs past it. So tokens keep rising through nodes that go down and
// come back, even empty, one at a time (a rolling outage), where the highest
// INCR alone could sit on a node the next majority missed and every later
// holder was refused until the counters caught up. Weaker than the
// single-node locks' tokens, and said plainly: redsync takes the lock with
// its own script, so the token is not issued in the same atomic step as the
// grant. A holder that stalls between the grant and the INCRs, long enough
// for its lease to pass and a successor to take the lock and its token, then
// gets a higher token than the successor's (or, racing its INCRs, the same
// one). And a majority of nodes that restart without persistence start their
// counters again. What it does guarantee: a holder frozen after it has its
// token (a GC pause mid-sale, the pause-holder case) is refused once any
// later holder has written.
func (l *Locker) TryAcquire(ctx context.Context, owner string) (lease.Lease, error) {
	ttl := l.opts.TTL
	if d := chaos.From(ctx).Lease; d > 0 {
		ttl = d // this request's lease (a fault hook: -chaos and the admin token)
	}
	// lesson:begin redlock
	m := l.rs.NewMutex(l.opts.Key,
		redsync.WithExpiry(ttl),
		redsync.WithGenValueFunc(func() (string, error) { return owner, nil }),
	)
	// lesson:end
	var sent time.Time
	err := l.gated(ctx, l.attempt(owner, ttl), func() error {
		sent = time.Now()
		// lesson:begin redlock
		return m.TryLockContext(ctx)
		// lesson:end
	})
	if errors.Is(err, step.ErrCancelled) {
		return nil, err // the lesson's sale cancelled before it asked
	}
	// lesson:begin redlock
	if err != nil {
		if down := l.failedNodes(err); l.nodes-down < l.quorum {
			return nil, fmt.Errorf("%w: %d of %d nodes failed: %s", ErrNoQuorum, down, l.nodes, oneLine(err))
		}
		return nil, lease.ErrTaken // taken, or a minority down: try again
	}
	// lesson:end
	// The lease's validity, as Redlock counts it (redsync's Until, and a
	// little sooner): from the sending of the first request, less the drift.
	// Lost closes then, by a timer: nothing renews a Redlock here.
	valid := lease.NewDeadline(lease.ValidUntil(sent, ttl), nil)
	release := func(ctx context.Context) error {
		valid.Stop()
		return l.release(ctx, m)
	}
	var token int64
	if l.opts.Fence {
		var err error
		if token, err = l.token(ctx); err != nil {
			return nil, errors.Join(err, release(context.WithoutCancel(ctx)))
		}
	}
	return lease.Timed(release, token, valid), nil
}

func (l *Locker) release(ctx context.Context, m *redsync.Mutex) error {
	// lesson:begin redlock
	ok, err := m.UnlockContext(ctx)
	// lesson:end
	switch {
	case ok:
		return nil
	case l.nodes-l.failedNodes(err) < l.quorum:
		return fmt.Errorf("redlock: release %s: %w", l.opts.Key, err)
	case err == nil:
		return fmt.Errorf("redlock: release %s: %w", l.opts.Key, lease.ErrNotHeld)
	default:
		return fmt.Errorf("redlock: release %s: %w: %w", l.opts.Key, lease.ErrNotHeld, err)
	}
}

// attempt is one acquisition as the lab's step-through shows it: the SET
// each node is sent, and how many must grant it.
func (l *Locker) attempt(owner string, ttl time.Duration) string {
	return fmt.Sprintf("Redlock: SET %s %s NX, lease %s, on each of %d nodes, %d to hold it", l.opts.Key, owner, ttl, l.nodes, l.quorum)
}

// gated runs one Redlock attempt, try, as one step of ctx's stepped sale
// (the lab's step-through): stopped before it, recorded with OK (a
// majority granted it), (nil) (it did not: taken, or a minority of the
// nodes down) or the error when too many nodes failed for a majority. redsync sends each node's
// SET from a goroutine of its own, which the gate in each node's client
// records but cannot stop (step.Hook, each step named by its node): so
// the one place a sale can be stopped before it asks every node at once is
// here, on the sale's own goroutine. Any other sale pays one context
// lookup.
func (l *Locker) gated(ctx context.Context, what string, try func() error) error {
	s := step.From(ctx)
	if s == nil {
		return try()
	}
	var err error
	if serr := s.Run(ctx, what, func() string {
		switch err = try(); {
		case err == nil:
			return "OK"
		case l.nodes-l.failedNodes(err) < l.quorum:
			return fmt.Sprintf("(error) %d of %d nodes failed: no majority possible", l.failedNodes(err), l.nodes)
		}
		return "(nil)"
	}); serr != nil {
		return serr
	}
	return err
}

// token INCRs the fencing counter on every node, takes the highest value a
// majority returned, and writes it back to the nodes that returned less, so
// that a majority holds it: ErrNoQuorum when fewer than a majority answered
// either step.
func (l *Locker) token(ctx context.Context) (int64, error) {
	counter := fence.CounterKey(l.opts.Key)
	incr := each(l.clients, func(c redis.UniversalClient) (int64, error) { return c.Incr(ctx, counter).Result() })
	var token int64
	var failed []error
	for _, r := range incr {
		if r.err != nil {
			failed = append(failed, r.err)
			continue
		}
		token = max(token, r.n)
	}
	if l.nodes-len(failed) < l.quorum {
		return 0, fmt.Errorf("%w: fencing counter on %d of %d nodes: %w", ErrNoQuorum, l.nodes-len(failed), l.nodes, errors.Join(failed...))
	}
	var behind []redis.UniversalClient
	for i, r := range incr {
		if r.err == nil && r.n < token {
			behind = append(behind, l.clients[i])
		}
	}
	holding := l.nodes - len(failed) - len(behind)
	for _, r := range each(behind, func(c redis.UniversalClient) (int64, error) {
		return raiseScript.Run(ctx, c, []string{counter}, token).Int64()
	}) {
		if r.err != nil {
			failed = append(failed, r.err)
			continue
		}
		holding++
	}
	if holding < l.quorum {
		return 0, fmt.Errorf("%w: fencing counter raised to %d on %d of %d nodes: %w", ErrNoQuorum, token, holding, l.nodes, errors.Join(failed...))
	}
	return token, nil
}

// reply is one node's answer to a command of each.
type reply struct {
	n   int64
	err error
}

// each runs do on every client at once and returns their replies, in the
// clients' order.
func each(clients []redis.UniversalClient, do func(redis.UniversalClient) (int64, error)) []reply {
	replies := make([]reply, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			n, err := do(c)
			replies[i] = reply{n, err}
		})
	}
	wg.Wait()
	return replies
}

// failedNodes counts the nodes that could not be reached in one attempt.
func (l *Locker) failedNodes(err error) int {
	var down int
	for _, e := range flatten(err) {
		var re *redsync.RedisError
		if errors.As(e, &re) {
			down++
		}
	}
	return down
}

// flatten unpacks errors.Join trees into their leaves.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// oneLine joins errors.Join's lines, so a reply or a log line stays one line.
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}
