// Package chaos carries per-request fault hooks, so each version's flaw can be
// made to happen on demand. The service sets them only when it runs with
// -chaos and the request carries the admin token; without them every hook is
// off and costs one context lookup.
package chaos

import (
	"context"
	"strings"
	"time"
)

// Faults are the hooks one request asks for.
type Faults struct {
	// Hold replaces the sale's business time (-work) for this request: a slow
	// holder, whose work outlasts its lease.
	Hold time.Duration
	// BeforeDelete runs at a release's last moment before it deletes the lock:
	// between v5's GET and DEL (its race window), and just before v6's
	// compare-and-delete script (which has no window). A long pause there lets
	// the lease expire and a successor take the lock.
	BeforeDelete func(ctx context.Context)
	// BeforeWrite runs at the sale's last moment before it writes the stock,
	// after every check it makes (the lease not known lost): a pause there is
	// one no check in the process can catch.
	BeforeWrite func(ctx context.Context)
	// ReplicaAck makes a single-node lock wait for this many replicas to
	// acknowledge each acquisition (package replicaack), whatever
	// -replica-ack says.
	ReplicaAck int
	// Lease replaces the lock's lease (-ttl) for this request's acquisition,
	// for the locks that take one per acquisition (redlock's, see
	// sale.Method.LeaseHook): redlock-restart holds a lock while a node
	// restarts, which takes milliseconds for a process and seconds for a
	// container, so it sizes the lease from a restart it measured.
	Lease time.Duration
	// Off switches fixes off for this request: each cell that holds is run
	// again with its fix off and must then show the flaw (make mutations),
	// or the cell could not have failed.
	Off Off
}

// Off names the fixes a request switches off (make mutations): each takes
// away what the fix does (a check, a wait, the lock's exclusion), and
// nothing else the sale does.
type Off struct {
	// Fence: the stock compares the sale's token with no other holder's:
	// each sale fences in a token domain of its own.
	Fence bool
	// LockAck: the lock's acquisition waits for no replica's
	// acknowledgement (-replica-ack, replica_ack=N; package replicaack).
	// The stock write's still does: each cell proves its own.
	LockAck bool
	// WriteAck: the sale's stock write waits for no replica's
	// acknowledgement; the lock's still does.
	WriteAck bool
	// Lock: the lock grants whoever asks, at once: the sale goes on without
	// waiting for it (unfenced: it has no token). It still asks for it in
	// the background and releases what it got when the sale ends, so a
	// cell that watches the lock sees its holder.
	Lock bool
	// LeaseCheck: the sale writes even when it knows its lease lost (the
	// watchdog's or the library's notice, checked before the write).
	LeaseCheck bool
	// Claim: a release that hands the lock over (-wait handoff) or wakes a
	// waiter (notify) does not check at the claim deadline that it was
	// taken: a dead waiter's turn passes only by the others' own periodic
	// check.
	Claim bool
	// Wake: a release neither hands the lock over (-wait handoff) nor wakes
	// the next waiter (notify): it frees the lock, and the waiters take it
	// only at their own periodic check (retry.Backstop), as if every
	// wake-up were lost.
	Wake bool
}

// ParseOff reads a comma-separated list of fixes to switch off (OffNames).
func ParseOff(v string) (Off, bool) {
	var o Off
	for _, name := range strings.Split(v, ",") {
		switch name {
		case "fence":
			o.Fence = true
		case "lock-ack":
			o.LockAck = true
		case "write-ack":
			o.WriteAck = true
		case "lock":
			o.Lock = true
		case "lease-check":
			o.LeaseCheck = true
		case "claim":
			o.Claim = true
		case "wake":
			o.Wake = true
		default:
			return Off{}, false
		}
	}
	return o, true
}

// OffNames are the fixes ParseOff knows.
const OffNames = "fence, lock-ack, write-ack, lock, lease-check, claim, wake"

// LockAckWait is how many replicas must acknowledge a lock's acquisition:
// n or the request's replica_ack, 0 with the lock's acknowledgement
// switched off.
func LockAckWait(ctx context.Context, n int) int {
	f := From(ctx)
	if f.Off.LockAck {
		return 0
	}
	return max(n, f.ReplicaAck)
}

// WriteAckWait is how many replicas must acknowledge a sale's stock write:
// n or the request's replica_ack, 0 with the write's acknowledgement
// switched off.
func WriteAckWait(ctx context.Context, n int) int {
	f := From(ctx)
	if f.Off.WriteAck {
		return 0
	}
	return max(n, f.ReplicaAck)
}

type key struct{}

// With returns ctx carrying f.
func With(ctx context.Context, f Faults) context.Context {
	return context.WithValue(ctx, key{}, f)
}

// From returns the faults ctx carries; none when it carries none.
func From(ctx context.Context) Faults {
	f, _ := ctx.Value(key{}).(Faults)
	return f
}

// BeforeDelete runs ctx's BeforeDelete hook, if any.
func BeforeDelete(ctx context.Context) {
	if f := From(ctx).BeforeDelete; f != nil {
		f(ctx)
	}
}

// BeforeWrite runs ctx's BeforeWrite hook, if any.
func BeforeWrite(ctx context.Context) {
	if f := From(ctx).BeforeWrite; f != nil {
		f(ctx)
	}
}

// StopProcess is a BeforeWrite hook that stops this whole process with
// SIGSTOP, as a long GC pause or a frozen VM would, until something sends it
// SIGCONT (the pause-holder scenario, once another holder has sold). The
// process's every goroutine stops with it: v8's watchdog too. The calling
// goroutine stops before it returns (see stopSelf).
func StopProcess(context.Context) { stopSelf() }

// Sleep is a BeforeDelete hook that pauses for d (or until ctx ends).
func Sleep(d time.Duration) func(context.Context) {
	return func(ctx context.Context) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
}
