// Package handoff is the queue behind -wait handoff, the direct hand-off: a
// waiter that finds the lock taken joins a queue in Redis in the same script
// that tried the lock, and a release, in one script, gives the lock to the
// first waiter still queued (its owner, a fresh lease, a fencing token when
// that waiter queued fenced) and publishes that to it. The woken waiter
// already holds the lock: it makes no attempt, and the lock is never free
// between two holders.
//
// Go's sync.Mutex does the same in starvation mode: the unlocker hands the
// lock to the first waiter instead of letting everyone race for it. Polling
// leaves the lock free after each release until some waiter's next attempt
// lands; notify wakes the first waiter, who then makes an attempt: a round
// trip during which the lock is free. Hand-off removes both.
//
// The lock scripts are the versions' own (v3 to v6 in package setnx, v7 and
// v8 in package reentrant): each is this package's queue functions
// (queue.lua) followed by the version's body, so each version keeps its
// lesson and only who gets the lock next, and how fast, changes.
//
// A waiter can die while queued (its replica killed, its client gone). So a
// grant is only an offer until claimed: the release gives the lock to the
// head of the queue for a short claim deadline (Claim, default DefaultClaim:
// a few round trips, whatever the version's lease, v3's none too); the woken
// waiter claims it (claim.lua), and its lease starts then. At the claim
// deadline the releasing process checks (Giver.Watch): a grant not claimed is
// taken back and handed to the next waiter still queued, so a dead waiter
// costs the queue one claim deadline, not a whole lease (v3: for ever). If
// the releasing process dies too, the unclaimed grant expires by itself and
// the waiters' own periodic check takes the free lock. A waiter that gives up
// leaves the queue, and if a release handed it the lock meanwhile, passes it
// on.
package handoff

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/fence"
	"github.com/redis/go-redis/v9"
)

var (
	//go:embed queue.lua
	queueSrc string
	//go:embed leave.lua
	leaveSrc    string
	leaveScript = Script(leaveSrc)
	//go:embed claim.lua
	claimSrc    string
	claimScript = Script(claimSrc)
	//go:embed reclaim.lua
	reclaimSrc    string
	reclaimScript = Script(reclaimSrc)
)

// DefaultClaim is how long a waiter handed the lock has to claim it: a few
// round trips and a busy scheduler's delay in delivering the grant, far less
// than any lease. A live waiter that misses it loses only its turn.
const DefaultClaim = 200 * time.Millisecond

// Script returns a hand-off script: the queue functions, then the plain
// scripts given, each as a local function of that name (their top-level
// returns become the function's), then body.
func Script(body string, plain ...Plain) *redis.Script {
	var b strings.Builder
	b.WriteString(queueSrc)
	for _, p := range plain {
		fmt.Fprintf(&b, "local function %s()\n%s\nend\n", p.Name, p.Src)
	}
	b.WriteString(body)
	return redis.NewScript(b.String())
}

// Plain is a version's plain script, run inside a hand-off script.
type Plain struct{ Name, Src string }

// Keys are one lock's hand-off keys, in the order every hand-off script
// takes them (List).
type Keys struct {
	Lock, Queue, Deadlines, Counter, Granted string
	// Passed counts the grants the releasing process's check took back at
	// their claim deadline (reclaim.lua) and passed on: how a run tells that
	// check's work from the waiters' own periodic check, which takes a free
	// lock just as well, only later (make mutations, dead-waiter-handoff).
	Passed string
}

// For returns the hand-off keys of lockKey.
func For(lockKey string) Keys {
	return Keys{
		Lock:      lockKey,
		Queue:     lockKey + ":handoff",
		Deadlines: lockKey + ":handoff:deadlines",
		Counter:   fence.CounterKey(lockKey),
		Granted:   lockKey + ":handoff:granted",
		Passed:    lockKey + ":handoff:passed",
	}
}

// Grants is the channel the grants to process's waiters are published on.
// Each waiter queues with its own process's channel, so a release publishes
// a grant to the one replica that waits for it: with one channel for all,
// every replica read and dropped every other replica's grants (13 % of a
// replica's CPU in a profile at c=64).
func (k Keys) Grants(process string) string { return k.Lock + ":grants:" + process }

// Waiter is how an attempt queues its owner when the lock is taken: the
// channel its grant is to be published on (Grants; the scripts refuse an
// empty one), how long it waits, and whether it is queued already (a release
// may then have handed it the lock).
type Waiter struct {
	Channel string
	Wait    time.Duration
	Queued  bool
}

// List is the KEYS of every hand-off script: lock, counter, queue,
// deadlines, grant marker. The lock and its counter come first, as in the
// versions' plain scripts, so a hand-off script can run a plain one's body as
// a function.
func (k Keys) List() []string { return []string{k.Lock, k.Counter, k.Queue, k.Deadlines, k.Granted} }

// Claim makes the grant a release handed owner its own, with a lease of ttl
// (0: no expiry, v3) counted from now. It returns an error wrapping
// lease.ErrTaken when the grant was taken back first (not claimed within the
// claim deadline): owner holds nothing, and must wait again.
//
// When ctx carries a lease.Rider (the sale's first command) and rdb can
// pipeline, the claim and that command go in one round trip, the claim
// first; the rider is told it rode only when the claim held. token is the
// grant's, for the rider's command (a fenced read).
func Claim(ctx context.Context, rdb redis.Scripter, k Keys, owner string, ttl time.Duration, token int64) error {
	keys, args := []string{k.Lock, k.Granted}, []any{owner, fence.PX(ttl)}
	r, p := lease.RiderFrom(ctx), pipeliner(rdb)
	var cmd *redis.Cmd
	if r != nil && p != nil {
		pipe := p.Pipeline()
		cmd = claimScript.EvalSha(ctx, pipe, keys, args...)
		r.Queue(pipe, token)
		sent := time.Now()
		_, _ = pipe.Exec(ctx) // each command keeps its own reply
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			cmd = nil // not run (Redis restarted, its scripts flushed): claim on its own
		} else if n, err := cmd.Int(); err == nil && n == 1 {
			r.Ride(sent)
		}
	}
	if cmd == nil {
		cmd = claimScript.Run(ctx, rdb, keys, args...)
	}
	n, err := cmd.Int()
	switch {
	case err != nil:
		return fmt.Errorf("handoff: claim %s: %w", k.Lock, err)
	case n != 1:
		return fmt.Errorf("handoff: claim %s: the grant was taken back: %w", k.Lock, lease.ErrTaken)
	}
	return nil
}

// pipeliner is rdb when it can pipeline (a go-redis client), else nil.
func pipeliner(rdb redis.Scripter) interface{ Pipeline() redis.Pipeliner } {
	p, _ := rdb.(interface{ Pipeline() redis.Pipeliner })
	return p
}

// Giver is how a lock's releases hand it over: its keys, the lock's kind
// ("string": v3 to v6; "hash": v7, v8) and the claim deadline; and the check
// it runs after claim deadlines (Released). Whether the next holder gets a
// fencing token is that holder's own wish, queued with it (queue.lua), never
// the releaser's: with -chaos a fenced and an unfenced sale share one lock.
// Safe for concurrent use.
type Giver struct {
	rdb   redis.Scripter
	keys  Keys
	kind  string
	claim time.Duration
	check *Recheck
}

// NewGiver returns the Giver of the lock k on rdb; claim <= 0 means
// DefaultClaim.
func NewGiver(rdb redis.Scripter, k Keys, kind string, claim time.Duration) *Giver {
	if claim <= 0 {
		claim = DefaultClaim
	}
	g := &Giver{rdb: rdb, keys: k, kind: kind, claim: claim}
	g.check = NewRecheck(g.reclaim)
	return g
}

// ClaimMS is the claim deadline as the scripts take it.
func (g *Giver) ClaimMS() int64 { return fence.PX(g.claim) }

// Released reads a hand-over script's reply: an integer status (the
// version's own), or the owner the lock was handed to. A grant is then
// checked after its claim deadline: if its waiter has not claimed it by
// then, the grant is taken back and the lock handed to the next waiter
// still queued, whose grant is checked in turn. A check that fails leaves an
// unclaimed grant to expire by itself; the waiters' periodic check then
// takes the free lock.
func (g *Giver) Released(ctx context.Context, reply any) (int64, error) {
	switch v := reply.(type) {
	case int64:
		return v, nil
	case string:
		if !chaos.From(ctx).Off.Claim { // switched off only by make mutations
			g.check.After(g.claim + time.Millisecond)
		}
		return 1, nil
	default:
		return 0, fmt.Errorf("handoff: hand over %s: unexpected reply %T %v", g.keys.Lock, reply, reply)
	}
}

// reclaim checks the grant in flight and says when to check again.
func (g *Giver) reclaim() time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ms, err := reclaimScript.Run(ctx, g.rdb, append(g.keys.List(), g.keys.Passed), g.kind, g.ClaimMS()).Int64()
	if err != nil || ms <= 0 {
		return 0
	}
	return time.Duration(ms)*time.Millisecond + time.Millisecond
}

// Recheck runs a check after a delay, one at a time: asking for a check
// while one is scheduled changes nothing, and the check says when it wants
// to run again (0: not until asked). Under load a release asks every
// millisecond and nearly every check finds nothing to do (the grant was
// claimed, the woken waiter took the lock), so one scheduled check serves
// them all. Safe for concurrent use.
type Recheck struct {
	check func() time.Duration

	mu      sync.Mutex
	pending bool
}

// NewRecheck returns a Recheck of check.
func NewRecheck(check func() time.Duration) *Recheck { return &Recheck{check: check} }

// After schedules the check in d, unless one is scheduled already.
func (r *Recheck) After(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending {
		return
	}
	r.pending = true
	time.AfterFunc(d, r.run)
}

func (r *Recheck) run() {
	next := r.check()
	r.mu.Lock()
	defer r.mu.Unlock()
	if next <= 0 {
		r.pending = false
		return
	}
	time.AfterFunc(next, r.run)
}

// Leave takes owner out of k's queue. If a release handed owner the lock
// meanwhile, release passes it on (to the next waiter, or frees it).
func Leave(ctx context.Context, rdb redis.Scripter, k Keys, owner string, release func(context.Context) error) error {
	held, err := leaveScript.Run(ctx, rdb, []string{k.Lock, k.Queue, k.Deadlines}, owner).Int()
	if err != nil {
		return fmt.Errorf("handoff: leave the queue %s: %w", k.Queue, err)
	}
	if held == 1 {
		if err := release(ctx); err != nil {
			return fmt.Errorf("handoff: pass on %s, handed over while leaving: %w", k.Lock, err)
		}
	}
	return nil
}

// Grant is what a release publishes: owner now holds the lock, with token
// (0: unfenced).
type Grant struct {
	Owner string
	Token int64
}

// ParseGrant reads a message published on the channel. A -wait notify
// wake-up (an owner alone) parses with token 0.
func ParseGrant(payload string) (Grant, error) {
	owner, token, found := strings.Cut(payload, " ")
	if !found {
		return Grant{Owner: owner}, nil
	}
	n, err := strconv.ParseInt(token, 10, 64)
	if err != nil {
		return Grant{}, fmt.Errorf("handoff: a grant with a bad token: %q", payload)
	}
	return Grant{Owner: owner, Token: n}, nil
}

// Flag is a boolean as the scripts take it.
func Flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
