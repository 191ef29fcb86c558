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
	// of its burst was served within half that deadline: the lock was free
	// for most of its wait, and nothing woke it.
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

// lostWakeup: bursts of sales at once, half through each replica, then
// nothing until every one has answered: the traffic stops while waiters are
// parked, so a waiter whose wake-up is lost has nothing left to wake it
// (v3-v8 wait handed off). Every waiter must be served or answer its
// deadline's 503 cleanly within that deadline, nothing may be oversold, and
// the lock must be free after each burst. Observed: which waited longest and
// how long, and how many were stranded (a 503 at the deadline).
func lostWakeup(ctx context.Context, e Env, lock string, before int64) (observed, detail string, err error) {
	v, _ := versions.Lookup(lock)
	hooks := ""
	if v.Wait {
		hooks = "wait=handoff"
	}
	grace := e.AcquireTimeout + e.TTL // the deadline, then one sale and its release
	var all []reply
	var stranded, hung, other []string
	var longest time.Duration
	longestAt := ""
	for round := range wakeupRounds {
		burst := make([]<-chan reply, wakeupBurst)
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
		if len(timedOut) > 0 && served > e.AcquireTimeout/2 {
			// The queue itself took half the deadline: a timeout behind
			// it says the machine is slow, not that a wake-up was lost.
			for _, t := range timedOut {
				other = append(other, t+fmt.Sprintf(", behind a burst whose last sale took %s", served.Round(time.Millisecond)))
			}
			timedOut = nil
		}
		stranded = append(stranded, timedOut...)
		if err := e.waitLock(ctx, false, e.TTL+5*time.Second); err != nil {
			return "", "", fmt.Errorf("the lock is still held after round %d: %w", round+1, err)
		}
	}
	oversold, stock, err := e.oversold(ctx, before, all...)
	if err != nil {
		return "", "", err
	}
	_, stock, _ = strings.Cut(stock, ", ") // the replies' statuses are too many to list
	detail = fmt.Sprintf("%d bursts of %d: %d stranded, longest wait %s (%s); %s", wakeupRounds, wakeupBurst, len(stranded),
		longest.Round(time.Millisecond), longestAt, stock)
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
	case v.LostWakeup != "":
		return StrandsCleanly, detail, nil
	case len(stranded) > 0:
		return Stranded, detail, nil
	}
	return AllWoken, detail, nil
}
