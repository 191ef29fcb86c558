package lease

import (
	"sync"
	"time"
)

// Drift is how much sooner than its nominal end a lease is taken to have run
// out: Redis expires a key up to a millisecond late or early, and the node's
// clock may run a little faster than this process's. Redlock counts validity
// the same way (1 % of the lease, plus 2 ms).
func Drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// ValidUntil is when a lease of ttl runs out, counted from sent, the moment
// the command that set it (an acquisition, a renewal, a claim) was sent: the
// node started the lease later than that, never earlier, so the deadline is
// never late. Counting from the reply instead would add the round trip, and
// a slow reply, to every lease.
func ValidUntil(sent time.Time, ttl time.Duration) time.Time {
	return sent.Add(ttl - Drift(ttl))
}

// Deadline is a lease's validity, kept by a timer: its Lost channel closes
// the moment the deadline passes, not at the next renewal tick, so a holder
// that checks before it writes never writes on a lease that already ran out.
// Renewals move it later (Extend). Safe for concurrent use.
type Deadline struct {
	onLost func()

	mu     sync.Mutex
	until  time.Time
	timer  *time.Timer
	lost   chan struct{}
	closed bool
}

// NewDeadline returns a Deadline at until. onLost, if not nil, runs once,
// just before Lost closes (a count, a log line).
func NewDeadline(until time.Time, onLost func()) *Deadline {
	d := &Deadline{onLost: onLost, until: until, lost: make(chan struct{})}
	d.mu.Lock() // the timer may fire at once: expire reads d.timer
	defer d.mu.Unlock()
	d.timer = time.AfterFunc(time.Until(until), d.expire)
	return d
}

// expire runs on the timer: lost, unless a renewal moved the deadline on
// after the timer had already fired.
func (d *Deadline) expire() {
	d.mu.Lock()
	if wait := time.Until(d.until); wait > 0 && !d.closed {
		d.timer.Reset(wait)
		d.mu.Unlock()
		return
	}
	d.mu.Unlock()
	d.Lose()
}

// Extend moves the deadline to until when that is later; it reports false,
// and changes nothing, once the lease is lost: a renewal that succeeds after
// the deadline passed does not bring back a lease whose holder may already
// have been told it is gone.
func (d *Deadline) Extend(until time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || !time.Now().Before(d.until) {
		return false
	}
	if until.After(d.until) {
		d.until = until
		d.timer.Reset(time.Until(until))
	}
	return true
}

// Lose closes Lost now (once), whatever the deadline: the lease is known gone.
func (d *Deadline) Lose() {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.closed = true
	d.timer.Stop()
	d.mu.Unlock()
	if d.onLost != nil {
		d.onLost()
	}
	close(d.lost)
}

// Stop ends the timer (the lease was released): Lost stays open.
func (d *Deadline) Stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.timer.Stop()
}

// Lost is closed once the deadline has passed or Lose was called.
func (d *Deadline) Lost() <-chan struct{} { return d.lost }

// Passed reports whether the deadline is behind us, by the clock: true even
// when the timer has not run yet (a process that was frozen past it checks
// the clock before its timers catch up).
func (d *Deadline) Passed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed || !time.Now().Before(d.until)
}
