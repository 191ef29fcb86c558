package scenario

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/versions"
)

// lost-wakeup's outcomes.
const (
	AllWoken = "every waiter served, none stranded"
	// Stranded is a waiter that answered its deadline's 503 while the rest
	// of its burst was served within half that deadline (the lock was free
	// for most of its wait, and nothing woke it), or behind a slower burst
	// during which the lock was seen free for freeBound or longer while
	// sales waited: a free lock nobody was woken for, not a slow queue.
	Stranded = "a waiter stranded until its deadline (lost wake-up)"
	// StrandsCleanly is the outcome of a version known to lose wake-ups
	// (its catalogue's lost_wakeup): every waiter was served or timed out
	// cleanly at its deadline, with nothing oversold. It is the same
	// outcome whether one was stranded this run or none, since it happens
	// at a rate: the detail (make scenarios prints it, the lab shows it on
	// the cell) counts them.
	StrandsCleanly   = "served, or stranded to a clean 503 at its deadline"
	HungPastDeadline = "a waiter hung past its deadline"
	OtherFailures    = "replies other than a sale, sold out or the deadline's 503"
)

// The bursts: enough waiters parked at once on both replicas that the
// last of each burst depends on being woken with no traffic after it.
const (
	wakeupRounds = 20
	wakeupBurst  = 32
)

// freeBound is how long the lock may be seen free while sales of a burst
// wait before their timeouts are strandings rather than a slow queue's: a
// release hands the lock over or wakes a waiter, who takes it, within a few
// milliseconds (one script, one message; a poller's interval, 20 ms); a lock
// left free that long waits for the waiters' own periodic check
// (retry.Backstop, 1 s) or their deadline.
const freeBound = 200 * time.Millisecond

// lostWakeup: bursts of sales at once, half through each replica, then
// nothing until every one has answered: the traffic stops while waiters are
// parked, so a waiter whose wake-up is lost has nothing left to wake it
// (v3-v8 wait handed off). Every waiter must be served or answer its
// deadline's 503 cleanly within that deadline, nothing may be oversold, and
// the lock must be free after each burst. Observed: which waited longest and
// how long, how many were stranded (a 503 at the deadline), and the longest
// the lock was seen free while sales waited, which tells a slow queue (the
// lock always held) from a free lock nobody was woken for. A mutation (the
// wake-up switched off) stops at the first burst that strands a waiter.
func lostWakeup(ctx context.Context, e Env, lock string, before int64) (observed, detail string, err error) {
	v, _ := versions.Lookup(lock)
	hooks := ""
	if v.Wait {
		hooks = "wait=handoff"
	}
	grace := e.AcquireTimeout + e.TTL // the deadline, then one sale and its release
	var all []reply
	var stranded, hung, other []string
	var longest, longestFree time.Duration
	longestAt := ""
	// A lock known to strand waiters now and then (the catalogue's
	// lost_wakeup) is judged at that rate, unless its wake-up is switched
	// off on purpose (make mutations): then any stranding is the flaw.
	atRate := v.LostWakeup != "" && e.off == ""
	for round := range wakeupRounds {
		burst := make([]<-chan reply, wakeupBurst)
		answered := make(chan struct{})
		free := e.freeWhile(ctx, answered)
		for i := range burst {
			burst[i] = e.sellAt(ctx, e.Replicas[i%2].URL, lock, hooks)
		}
		// served is how long the burst's last sale took: a timeout is a
		// stranding only when every sale of its burst was done well inside
		// the deadline, so that the lock was free for most of its wait.
		var served time.Duration
		var timedOut []string
		for i, ch := range burst {
			r := <-ch
			if r.err != nil {
				close(answered)
				<-free
				return "", "", r.err
			}
			all = append(all, r)
			at := fmt.Sprintf("round %d, request %d (%s)", round+1, i+1, e.Replicas[i%2].Name)
			if r.elapsed > longest {
				longest, longestAt = r.elapsed, at
			}
			switch {
			case r.elapsed > grace:
				hung = append(hung, fmt.Sprintf("%s answered %d after %s", at, r.status, r.elapsed.Round(time.Millisecond)))
			case r.status == http.StatusServiceUnavailable && r.code == api.CodeLockTimeout:
				timedOut = append(timedOut, fmt.Sprintf("%s waited %s", at, r.elapsed.Round(time.Millisecond)))
			case r.status != http.StatusOK && r.status != http.StatusConflict:
				other = append(other, fmt.Sprintf("%s answered %d %s", at, r.status, r.code))
			default:
				served = max(served, r.elapsed)
			}
		}
		close(answered)
		freeFor := <-free
		longestFree = max(longestFree, freeFor)
		if len(timedOut) > 0 && served > e.AcquireTimeout/2 && freeFor < freeBound {
			// The queue itself took half the deadline, the lock never
			// left free for long: a timeout behind it says the machine
			// is slow, not that a wake-up was lost.
			for _, t := range timedOut {
				other = append(other, t+fmt.Sprintf(", behind a burst whose last sale took %s", served.Round(time.Millisecond)))
			}
			timedOut = nil
		}
		stranded = append(stranded, timedOut...)
		if err := e.waitLock(ctx, false, e.TTL+5*time.Second); err != nil {
			return "", "", fmt.Errorf("the lock is still held after round %d: %w", round+1, err)
		}
		if !atRate && e.off != "" && len(stranded) > 0 {
			break // a mutation needs its flaw once: the rounds left would only repeat it
		}
	}
	oversold, stock, err := e.oversold(ctx, before, all...)
	if err != nil {
		return "", "", err
	}
	_, stock, _ = strings.Cut(stock, ", ") // the replies' statuses are too many to list
	detail = fmt.Sprintf("%d of %d bursts of %d: %d stranded, longest wait %s (%s), the lock seen free for up to %s while sales waited; %s",
		len(all)/wakeupBurst, wakeupRounds, wakeupBurst, len(stranded), longest.Round(time.Millisecond), longestAt, longestFree.Round(time.Millisecond), stock)
	for _, list := range [][]string{stranded, hung, other} {
		if len(list) > 0 {
			detail += "; " + strings.Join(list[:min(len(list), 3)], "; ")
		}
	}
	switch {
	case oversold > 0:
		return Oversell, detail + fmt.Sprintf("; %d oversold", oversold), nil
	case len(hung) > 0:
		return HungPastDeadline, detail, nil
	case len(other) > 0:
		return OtherFailures, detail, nil
	case atRate:
		return StrandsCleanly, detail, nil
	case len(stranded) > 0:
		return Stranded, detail, nil
	}
	return AllWoken, detail, nil
}

// freeWhile samples the lock every few milliseconds until answered closes,
// and sends the longest it saw the lock free, counted from the first time
// it saw it held (before that the burst's sales are still on their way):
// free while sales had not answered, the lock was there for a waiter to
// take. A sample that fails counts as held. For etcd and ZooKeeper a
// waiter's own key or node keeps the lock "held" (Env.locked): their free
// lock shows as a waiter that never learns it is first, not as a gap.
func (e Env) freeWhile(ctx context.Context, answered <-chan struct{}) <-chan time.Duration {
	out := make(chan time.Duration, 1)
	go func() {
		var longest time.Duration
		var since time.Time // when the current free run began; zero: held at the last sample
		seenHeld := false
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			locked, err := e.locked(ctx)
			now := time.Now()
			switch {
			case err != nil || locked:
				seenHeld, since = true, time.Time{}
			case !seenHeld:
			case since.IsZero():
				since = now
			default:
				longest = max(longest, now.Sub(since))
			}
			select {
			case <-answered:
				out <- longest
				return
			case <-ctx.Done():
				out <- longest
				return
			case <-tick.C:
			}
		}
	}()
	return out
}
