package retry

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/handoff"
	"github.com/redis/go-redis/v9"
)

// Notifier is the other way to wait (-wait notify): waiters queue in Redis,
// and a release wakes the first of them with a pub/sub message, instead of
// every waiter polling.
//
// Redisson's RLock publishes each release to every waiter; they race, one
// wins and the rest wait again, so who is served next is still a draw, and
// the unlucky wait long. Its fair lock queues the waiters, and this is that
// design: a sorted set of waiters in arrival order (enqueue.lua), and a
// release that wakes only the first (wake.lua). A waiter tries the lock when
// it is first, so the lock is handed over in arrival order across every
// replica, and each hand-over costs one message and one attempt.
//
// A message can be lost (the subscription reconnecting), and a holder that
// crashed never wakes anyone, so a waiter also checks its place every
// Backstop without a message. A waiter can die while queued (its replica
// killed): woken, it never tries. So a woken waiter has a claim deadline
// (handoff.DefaultClaim by default) to take the lock; the releasing process
// checks at that deadline, and a first waiter that was woken and has not
// taken the free lock is dropped and the next one woken. Without it the
// waiters behind a dead one waited for its own deadline (Redisson's fair lock
// has that cost).
//
// One Notifier serves one lock key in a process: one subscription, shared by
// every waiter, each woken by its owner name.
type Notifier struct {
	lockKey  string
	queue    string
	woken    string // notify's woken waiters and their claim deadlines
	passed   string // the dead woken waiters this side dropped (PassedKey)
	claim    time.Duration
	channel  string // notify's wake-ups, every replica's
	grants   string // hand-off's grants to this Notifier's waiters only
	backstop time.Duration
	rdb      redis.Scripter
	sub      *redis.PubSub
	log      *slog.Logger
	done     chan struct{}

	mu      sync.Mutex
	waiters map[string]chan int64 // by owner: a message wakes its owner, with a hand-off's token
	// holders counts each owner's holds obtained here and not yet given
	// back, so that a nested acquisition does not queue behind the waiters
	// who wait for the lock it already holds.
	holders map[string]int
	recheck *handoff.Recheck // the check after a woken waiter's claim deadline
}

// QueueKeys are -wait notify's keys of lockKey: its queue and its woken
// waiters.
func QueueKeys(lockKey string) (queue, woken string) {
	return lockKey + ":queue", lockKey + ":queue:woken"
}

// PassedKey counts the dead woken waiters of lockKey's -wait notify queue
// that a release, or the releasing process's check at their claim deadline,
// dropped to wake the next: how a run tells that check's work from the
// waiters' own periodic check (enqueue.lua), which drops them too, only
// later (make mutations, dead-waiter-notify).
func PassedKey(lockKey string) string { return lockKey + ":queue:passed" }

// WakeChannel is the channel -wait notify wakes lockKey's waiters on, every
// replica's.
func WakeChannel(lockKey string) string { return lockKey + ":wake" }

// Backstop is how long a waiter waits for its message before it checks its
// place in the queue anyway.
const Backstop = time.Second

// defaultWait is the queue deadline of a waiter whose context has none.
const defaultWait = time.Minute

var (
	//go:embed dead.lua
	deadSrc string
	//go:embed enqueue.lua
	enqueueSrc    string
	enqueueScript = redis.NewScript(deadSrc + enqueueSrc)
	//go:embed wake.lua
	wakeSrc    string
	wakeScript = redis.NewScript(deadSrc + wakeSrc)
	//go:embed unwake.lua
	unwakeSrc    string
	unwakeScript = redis.NewScript(unwakeSrc)
)

// NewNotifier subscribes on rdb to lockKey's wake-up channel (-wait notify,
// every replica's) and to a grant channel of its own (-wait handoff: the
// releases publish there only the grants to its waiters), and returns the
// Notifier of lockKey, whose waiters check their place every backstop
// (Backstop when <= 0) without a message, and take the lock they are woken
// for within claim (handoff.DefaultClaim when <= 0). A subscription that
// fails now is retried by go-redis in the background; until it is up,
// waiters check every backstop. log may be nil. Close stops it.
func NewNotifier(ctx context.Context, rdb *redis.Client, lockKey string, backstop, claim time.Duration, log *slog.Logger) *Notifier {
	if backstop <= 0 {
		backstop = Backstop
	}
	if claim <= 0 {
		claim = handoff.DefaultClaim
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	queue, woken := QueueKeys(lockKey)
	n := &Notifier{
		lockKey:  lockKey,
		queue:    queue,
		woken:    woken,
		passed:   PassedKey(lockKey),
		claim:    claim,
		channel:  WakeChannel(lockKey),
		grants:   handoff.For(lockKey).Grants(uuid.NewString()),
		backstop: backstop,
		rdb:      rdb,
		log:      log,
		done:     make(chan struct{}),
		waiters:  map[string]chan int64{},
		holders:  map[string]int{},
	}
	n.recheck = handoff.NewRecheck(n.check)
	n.sub = rdb.Subscribe(ctx, n.channel, n.grants)
	go n.listen()
	return n
}

// Close ends the subscription.
func (n *Notifier) Close() {
	if err := n.sub.Close(); err != nil {
		n.log.Warn("closing the wake-up subscription", "channel", n.channel, "err", err)
	}
	<-n.done
}

func (n *Notifier) listen() {
	defer close(n.done)
	// go-redis's Channel reconnects and resubscribes after a network error;
	// it is closed only by Close.
	for msg := range n.sub.Channel() {
		g, err := handoff.ParseGrant(msg.Payload)
		if err != nil {
			n.log.Warn("a message on the wake-up channel", "channel", n.channel, "err", err)
			continue
		}
		n.mu.Lock()
		if ch, ok := n.waiters[g.Owner]; ok {
			select {
			case ch <- g.Token:
			default: // already woken
			}
		}
		n.mu.Unlock()
	}
}

// register makes owner's channel of messages; unregister drops it.
func (n *Notifier) register(owner string) <-chan int64 {
	ch := make(chan int64, 1)
	n.mu.Lock()
	n.waiters[owner] = ch
	n.mu.Unlock()
	return ch
}

func (n *Notifier) unregister(owner string) {
	n.mu.Lock()
	delete(n.waiters, owner)
	n.mu.Unlock()
}

// waitFor is how long a waiter whose context ends at its deadline waits in a
// queue: until then, or defaultWait when it has none.
func waitFor(ctx context.Context) time.Duration {
	if deadline, ok := ctx.Deadline(); ok {
		return max(time.Until(deadline), time.Millisecond)
	}
	return defaultWait
}

// Notified waits for a guard through a Notifier.
type Notified struct {
	g     Guard
	n     *Notifier
	count Counter
}

// Notify returns g waiting through n: queued, and woken by the release. The
// lease it returns tells n of its release, whatever the release's outcome:
// that is what wakes the next waiter.
func Notify(g Guard, n *Notifier, count Counter) *Notified {
	return &Notified{g: g, n: n, count: count}
}

// Acquire joins the queue, tries when it is first, and otherwise waits to be
// woken (or Backstop). An owner that already holds the lock here (a nested
// acquisition) does not queue: it polls every Backstop.
func (w *Notified) Acquire(ctx context.Context, owner string) (lease.Lease, error) {
	attempts := 0
	defer func() { w.count.add(attempts) }()
	try := func(ctx context.Context) (lease.Lease, error) { return w.g.TryAcquire(ctx, owner) }
	var l lease.Lease
	var err error
	if w.n.holding(owner) {
		l, err = until(ctx, w.n.backstop, &attempts, try)
	} else {
		l, err = w.n.queued(ctx, owner, &attempts, try)
	}
	if err != nil {
		return nil, err
	}
	w.n.hold(owner) // it stays first in the queue until released
	return lease.WithRelease(l, func(ctx context.Context) error {
		defer w.n.released(ctx, owner)
		return l.Release(ctx)
	}), nil
}

// queued obtains the lock for owner through the queue.
func (n *Notifier) queued(ctx context.Context, owner string, attempts *int, try func(context.Context) (lease.Lease, error)) (lease.Lease, error) {
	attemptCtx := context.WithoutCancel(ctx)
	woken := n.register(owner)
	defer n.unregister(owner)
	wait := waitFor(ctx)
	first, err := n.enqueue(attemptCtx, owner, wait)
	if err != nil {
		return nil, err
	}
	timer := time.NewTimer(n.backstop)
	defer timer.Stop()
	wasWoken := false
	for {
		if first {
			*attempts++
			l, err := try(attemptCtx)
			if !errors.Is(err, lease.ErrTaken) {
				if err != nil {
					n.leave(attemptCtx, owner)
				}
				return l, err
			}
			if wasWoken { // alive: not to be dropped at the claim deadline
				n.unwake(attemptCtx, owner)
			}
		}
		wasWoken = false
		select {
		case <-woken:
			first, wasWoken = true, true
		case <-timer.C:
			timer.Reset(n.backstop)
			if first, err = n.enqueue(attemptCtx, owner, wait); err != nil {
				n.leave(attemptCtx, owner)
				return nil, err
			}
		case <-ctx.Done():
			n.leave(attemptCtx, owner)
			return nil, notObtained(ctx, *attempts)
		}
	}
}

// enqueue joins the queue (or keeps the owner's place) and reports whether
// the owner is first.
func (n *Notifier) enqueue(ctx context.Context, owner string, wait time.Duration) (bool, error) {
	first, err := enqueueScript.Run(ctx, n.rdb, []string{n.queue, n.lockKey, n.woken}, owner, strconv.FormatInt(wait.Milliseconds(), 10)).Int()
	if err != nil {
		return false, fmt.Errorf("join the wait queue %s: %w", n.queue, err)
	}
	return first == 1, nil
}

// leave takes owner out of the queue and wakes the next waiter if the lock is
// free; after that waiter's claim deadline a check follows (check). A
// failure is only logged: the entry expires at its deadline, and the waiters
// check their place every Backstop.
func (n *Notifier) leave(ctx context.Context, owner string) {
	if n.wake(ctx, owner, true) && !chaos.From(ctx).Off.Claim { // switched off only by make mutations
		n.recheck.After(n.claim + time.Millisecond)
	}
}

// wake runs wake.lua for owner ("" for none), waking the next waiter when
// wake is set, and reports whether a waiter was woken, or is still within
// its claim deadline.
func (n *Notifier) wake(ctx context.Context, owner string, wake bool) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := wakeScript.Run(ctx, n.rdb, []string{n.queue, n.lockKey, n.woken, n.passed}, owner, n.channel, n.claim.Milliseconds(), handoff.Flag(wake)).Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		n.log.Warn("leaving the wait queue", "queue", n.queue, "err", err)
	}
	return err == nil
}

// check runs after a woken waiter's claim deadline: if the lock is still
// free and a woken waiter whose deadline passed is still first, it died or
// went away: it is dropped and the next waiter woken, and checked in turn.
// It stops once the lock is held or none waits, or the Notifier is closed.
func (n *Notifier) check() time.Duration {
	select {
	case <-n.done:
		return 0
	default:
	}
	if n.wake(context.Background(), "", true) {
		return n.claim + time.Millisecond
	}
	return 0
}

// unwake says that owner, woken, found the lock taken and waits again: it
// is alive, and must not be dropped at its claim deadline.
func (n *Notifier) unwake(ctx context.Context, owner string) {
	if err := unwakeScript.Run(ctx, n.rdb, []string{n.woken}, owner).Err(); err != nil {
		n.log.Warn("waiting again in the queue", "queue", n.queue, "err", err)
	}
}

func (n *Notifier) hold(owner string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.holders[owner]++
}

func (n *Notifier) holding(owner string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.holders[owner] > 0
}

// released records that owner gave back one hold, and wakes the next waiter
// when the lock is free (with the wake-up switched off, chaos.Off.Wake, it
// only leaves the queue).
func (n *Notifier) released(ctx context.Context, owner string) {
	n.mu.Lock()
	if n.holders[owner]--; n.holders[owner] <= 0 {
		delete(n.holders, owner)
	}
	n.mu.Unlock()
	if chaos.From(ctx).Off.Wake { // switched off only by make mutations: wakes none
		n.wake(ctx, owner, false)
		return
	}
	n.leave(ctx, owner)
}
