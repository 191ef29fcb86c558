package server

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/sale"
)

// faults reads the fault hooks of a /sale request: hold=DURATION (this sale's
// business time), release_pause=DURATION (a pause at the release's last moment
// before it deletes the lock), nested=1 (take the lock twice) and fence=1|0
// (fencing on or off for this sale, whatever -fence says; nil when not
// asked), stop_before_write=1, replica_ack=N, lease=DURATION (this
// acquisition's lease, for the locks that take one per acquisition) and
// off=FIX,... (fixes switched off, see chaos.Off: make mutations). They
// need -chaos and the admin token; a request without them is untouched.
func (h *handlers) faults(r *http.Request, q url.Values) (f chaos.Faults, nested bool, fence *bool, rerr *requestError) {
	duration := func(v string, limit time.Duration) (time.Duration, bool) {
		d, err := time.ParseDuration(v)
		return d, err == nil && d > 0 && d <= limit
	}
	boolean := func(v string) (bool, bool) {
		b, err := strconv.ParseBool(v)
		return b, err == nil
	}
	hooks := []hook{
		{"hold", "a duration in (0, " + MaxHold.String() + "]", func(v string) (ok bool) { f.Hold, ok = duration(v, MaxHold); return ok }},
		{"release_pause", "a duration in (0, " + maxPause.String() + "]", func(v string) bool {
			d, ok := duration(v, maxPause)
			f.BeforeDelete = chaos.Sleep(d)
			return ok
		}},
		{"nested", "1 or 0", func(v string) (ok bool) { nested, ok = boolean(v); return ok }},
		{"stop_before_write", "1 or 0", func(v string) bool {
			stop, ok := boolean(v)
			if stop {
				f.BeforeWrite = chaos.StopProcess
			}
			return ok
		}},
		{"replica_ack", "a replica count, 0-5", func(v string) bool {
			n, err := strconv.Atoi(v)
			f.ReplicaAck = n
			return err == nil && n >= 0 && n <= 5
		}},
		{"lease", "a duration in (0, " + maxLease.String() + "]", func(v string) (ok bool) { f.Lease, ok = duration(v, maxLease); return ok }},
		{"off", "fixes to switch off, comma-separated: " + chaos.OffNames, func(v string) (ok bool) { f.Off, ok = chaos.ParseOff(v); return ok }},
		{"fence", "1 or 0", func(v string) bool {
			b, ok := boolean(v)
			fence = &b
			return ok
		}},
	}
	if !slices.ContainsFunc(hooks, func(p hook) bool { return q.Has(p.name) }) {
		return f, false, nil, nil
	}
	// A stepped sale (the lab's lessons) may ask for fencing, a nested
	// acquisition and its lease without -chaos: the lessons' fix, v6's
	// story, and Redlock's restart story, whose holder must outlive the
	// learner's clicks through two nodes' restarts (a lease is asked of
	// Redlock only: choose refuses it of the others). All shown on make
	// up's replicas, and stepping is already the admin's beyond loopback
	// (startStepped).
	lesson := func(name string) bool { return name == "fence" || name == "nested" || name == "lease" }
	if q.Has("step") && h.LessonLease > 0 && !slices.ContainsFunc(hooks, func(p hook) bool { return !lesson(p.name) && q.Has(p.name) }) {
		for _, p := range hooks {
			if lesson(p.name) && q.Has(p.name) && !p.set(q.Get(p.name)) {
				return f, false, nil, &requestError{api.CodeBadRequest, fmt.Sprintf("%s=%q: want %s", p.name, q.Get(p.name), p.want)}
			}
		}
		return f, nested, fence, nil
	}
	if !h.Chaos {
		return f, false, nil, &requestError{api.CodeChaosDisabled, "fault hooks (hold, release_pause, nested, fence, stop_before_write, replica_ack, lease, off) need the service started with -chaos"}
	}
	if !h.authorized(r) {
		return f, false, nil, &requestError{api.CodeUnauthorized, "fault hooks need the admin token: send Authorization: Bearer <token>"}
	}
	for _, p := range hooks {
		if q.Has(p.name) && !p.set(q.Get(p.name)) {
			return f, false, nil, &requestError{api.CodeBadRequest, fmt.Sprintf("%s=%q: want %s", p.name, q.Get(p.name), p.want)}
		}
	}
	return f, nested, fence, nil
}

// hook is one fault hook's query parameter: what it wants, and set, which
// applies its value and reports whether it was well formed.
type hook struct {
	name, want string
	set        func(v string) bool
}

// The fault hooks' longest durations. A hold is a holder's business time,
// which a replica stopping lets finish: MaxHold is part of its grace period.
// A release pause must end before the release's own timeout
// (sale.ReleaseTimeout), or it would be that timeout, not the pause, that the
// scenario shows.
//
// A lease= holds the lock against every other sale for that long, or until
// its holder releases it.
const (
	MaxHold  = 5 * time.Second
	maxPause = sale.ReleaseTimeout - time.Second
	maxLease = 2 * time.Minute
)
