// Package handoff is the queue behind -wait handoff, the direct hand-off: a
// waiter that finds the lock taken joins a queue in Redis in the same script
// that tried the lock, and a release, in one script, gives the lock to the
// first waiter still queued (its owner, a fresh lease, a fencing token when
// fenced) and publishes that to it. The woken waiter already holds the lock:
// it makes no attempt, and the lock is never free between two holders.
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
// What it costs: a waiter that died while queued is still handed the lock if
// its deadline has not passed, and holds it until its lease ends (v3: for
// ever, v3's own lesson). A waiter that gives up leaves the queue, and if a
// release handed it the lock meanwhile, passes it on.
package handoff

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/locks/fence"
	"github.com/redis/go-redis/v9"
)

var (
	//go:embed queue.lua
	queueSrc string
	//go:embed leave.lua
	leaveSrc    string
	leaveScript = Script(leaveSrc)
)

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
	Lock, Queue, Deadlines, Counter string
}

// For returns the hand-off keys of lockKey.
func For(lockKey string) Keys {
	return Keys{
		Lock:      lockKey,
		Queue:     lockKey + ":handoff",
		Deadlines: lockKey + ":handoff:deadlines",
		Counter:   fence.CounterKey(lockKey),
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
// deadlines. The lock and its counter come first, as in the versions' plain
// scripts, so a hand-off script can run a plain one's body as a function.
func (k Keys) List() []string { return []string{k.Lock, k.Counter, k.Queue, k.Deadlines} }

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
