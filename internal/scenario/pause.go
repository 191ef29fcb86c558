package scenario

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/reason"
	"github.com/locklab/locklab/internal/versions"
)

// pauseHolder: S, on replica 1, takes the lock, reads the stock, makes every
// check it makes (v8: the lease is not known lost), and then its whole
// process stops (SIGSTOP, by its stop_before_write hook), watchdog and all:
// Kleppmann's GC pause between the check and the write. Once the lease has
// expired, B, on replica 2, takes the lock and sells; replica 1 resumes and S
// writes what it read before. Without fencing both sell the same unit; with
// it the stock refuses S's stale write (412). The pause is placed after the
// check on purpose: a pause during the work is caught when the watchdog wakes
// before the sale does, and missed when the sale wakes first; no check in
// the process can catch one after it.
func pauseHolder(fenced bool) runFunc {
	return func(ctx context.Context, e Env, lock string, before int64) (string, string, error) {
		return pausedHolder(ctx, e, lock, before, fenced)
	}
}

func pausedHolder(ctx context.Context, e Env, lock string, before int64, fenced bool) (observed, detail string, err error) {
	fence := fenceHook(fenced)
	s := e.sellAt(ctx, e.Replicas[0].URL, lock, "stop_before_write=1&"+fence)
	thaw := e.thaw(e.Replicas[0].Name)         // it stops itself
	defer func() { err = also(err, thaw()) }() // whatever happens, the replica runs again (also if it stopped late)
	stopped := func() (bool, error) { return e.Procs.Stopped(e.Replicas[0].Name) }
	if err := e.waitUntil(ctx, 5*time.Second, stopped); err != nil {
		return "", "", fmt.Errorf("the first sale's replica never stopped before its write: %w", err)
	}
	e.mark(reason.New("stoppedBeforeWrite", "{node} stopped before its write", "node", e.Replicas[0].Name))
	if noLease(lock) {
		return e.pausedForever(ctx, lock, before, fence, s, thaw)
	}
	if err := e.waitLock(ctx, false, 3*e.TTL); err != nil {
		return "", "", fmt.Errorf("the frozen holder's lease never expired: %w", err)
	}
	rb := <-e.sellAt(ctx, e.Replicas[1].URL, lock, fence)
	if rb.err != nil {
		return "", "", rb.err
	}
	e.mark(reason.New("resumed", "{node} resumed", "node", e.Replicas[0].Name))
	if err := thaw(); err != nil {
		return "", "", err
	}
	rs := <-s
	if stranded(lock, rb) { // sent once the frozen holder's key had vanished: the lock was free
		return "", "", fmt.Errorf("the second sale %w", errStranded)
	}
	observed, detail, err = e.verdict(ctx, before, rs, rb)
	if err != nil || observed != NoOversell || rs.code != api.CodeFenced {
		return observed, detail, err
	}
	return StaleRefused, detail, nil
}

// noLease says that lock's hold never runs out while its holder lives.
func noLease(lock string) bool {
	v, _ := versions.Lookup(lock)
	return v.NoLease
}

// pausedForever is pause-holder for a lock with no lease (db-getlock): the
// frozen holder keeps it, so the second sale, sent while it is frozen, must
// still be waiting after twice the TTL (any lease would have run out), be
// served only after the holder resumes, sells its unit, and releases.
func (e Env) pausedForever(ctx context.Context, lock string, before int64, fence string, s <-chan reply, thaw func() error) (string, string, error) {
	second := e.sellAt(ctx, e.Replicas[1].URL, lock, fence)
	select {
	case rb := <-second:
		_ = thaw()
		rs := <-s
		observed, detail, err := e.verdict(ctx, before, rs, rb)
		return observed, detail + ", the second sale answered " + rb.String() + " while the holder was frozen", err
	case <-time.After(2 * e.TTL): // past any lease: the second sale still waits
	}
	held, err := e.locked(ctx)
	if err != nil {
		return "", "", err
	}
	resumed := time.Now()
	e.mark(reason.New("resumed", "{node} resumed", "node", e.Replicas[0].Name))
	if err := thaw(); err != nil {
		return "", "", err
	}
	rs, rb := <-s, <-second
	observed, detail, err := e.verdict(ctx, before, rs, rb)
	detail += fmt.Sprintf(", the second sale still waiting %s into the pause (the lock held: %v), answered %s after the holder resumed",
		2*e.TTL, held, time.Since(resumed).Round(time.Millisecond))
	if err != nil || observed != NoOversell || !held || rs.outcome != api.Sold || rb.outcome != api.Sold {
		return observed, detail, err
	}
	return WaitsForHolder, detail, nil
}

// freeze freezes the named process and returns what thaws it, once however
// often it is called.
func (e Env) freeze(name string) (thaw func() error, err error) {
	if err := e.Procs.Freeze(name, true); err != nil {
		return nil, err
	}
	return e.thaw(name), nil
}

// thaw resumes the named process, once however often it is called.
func (e Env) thaw(name string) func() error {
	return sync.OnceValue(func() error { return notUndone(name, LeftFrozen, e.Procs.Freeze(name, false)) })
}
