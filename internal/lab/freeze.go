package lab

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/locklab/locklab/internal/api"
)

// A lesson may freeze a replica's whole process (SIGSTOP), as a long GC
// pause freezes it: the etcd and ZooKeeper stories' paused holder. Their
// session keep-alives are sent by the replica's client for all its sales,
// not through the sale's step gate, so only freezing the process stops
// them. A frozen replica answers nothing, so the lab thaws it whatever
// happens: when the page asks (its next step, its reset, pagehide), at
// its bound (FreezeBound), and when the lab closes.

// Freezer stops (SIGSTOP) and resumes (SIGCONT) a process of the stack by
// name: the local cluster's (package cluster).
type Freezer interface {
	Freeze(name string, frozen bool) error
}

// FreezeBound is the longest a lesson keeps a replica frozen: longer than
// the lesson's lease (server.LessonLease, 10 s) and a ZooKeeper session of
// make up's -ttl (20 s), so either runs out; shorter than a stepped sale
// nobody reads (step.DefaultIdle, 30 s), so the frozen holder's sale is
// still there to step once thawed.
const FreezeBound = 25 * time.Second

// freezeBound is the lab's bound: Config.FreezeBound, or FreezeBound.
func (l *Lab) freezeBound() time.Duration {
	if l.cfg.FreezeBound > 0 {
		return l.cfg.FreezeBound
	}
	return FreezeBound
}

// The lab's words for why no lesson can freeze a replica here, and the
// command that starts a stack where one can.
const (
	freezeCommand  = "make up"
	whyNoFreezeHow = "this lab has no local cluster whose processes it can freeze (it was started without one, as the Compose stack starts it: its container cannot signal another container's process)"
)

// frozen are the replicas a lesson froze, each with the timer that thaws it.
type frozen struct {
	mu     sync.Mutex
	timers map[string]*time.Timer
	until  map[string]time.Time
}

// Frozen is what a freeze or thaw answers.
type Frozen struct {
	Replica string    `json:"replica"`
	Frozen  bool      `json:"frozen"`
	Until   time.Time `json:"until,omitzero"` // when the lab thaws it by itself
}

// freezer is the stack's Freezer, or why there is none ("" when there is).
func (l *Lab) freezer(ctx context.Context) (Freezer, string) {
	if l.cfg.Freezer == nil {
		return nil, whyNoFreezeHow
	}
	f, err := l.cfg.Freezer(ctx)
	if err != nil {
		return nil, "the lab could not read the local cluster's state: " + err.Error()
	}
	return f, ""
}

// isFrozen says whether a lesson froze replica and has not thawed it.
func (l *Lab) isFrozen(replica string) bool {
	l.frozen.mu.Lock()
	defer l.frozen.mu.Unlock()
	_, ok := l.frozen.timers[replica]
	return ok
}

// lessonFreeze freezes the replica the path names (SIGSTOP), for at most
// its bound. Refused while a run or a cell uses the stack (they fault
// the same processes), and where the lab cannot freeze (503, saying why).
func (l *Lab) lessonFreeze(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("replica")
	f, why := l.freezer(r.Context())
	if f == nil {
		writeError(w, http.StatusServiceUnavailable, "no_freeze", "Could not freeze: "+why+", start "+freezeCommand+".")
		return
	}
	if !slices.Contains(l.found.find(r.Context()), name) {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no replica "+name+" on this stack now")
		return
	}
	l.mu.Lock()
	busy := l.busy
	l.mu.Unlock()
	if busy != "" {
		writeError(w, http.StatusConflict, "busy", busy+" is running on the stack: a lesson freezes a replica it uses, so wait for it to end (or stop it)")
		return
	}
	l.frozen.mu.Lock()
	defer l.frozen.mu.Unlock()
	if _, ok := l.frozen.timers[name]; !ok {
		if err := f.Freeze(name, true); err != nil {
			// Half stopped is still stopped: resume whatever it reached.
			if cerr := f.Freeze(name, false); cerr != nil {
				l.cfg.Log.Error("a replica a lesson froze could not be thawed: fix it by hand", "replica", name, "err", cerr)
			}
			writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "could not freeze "+name+": "+err.Error())
			return
		}
		if l.frozen.timers == nil {
			l.frozen.timers, l.frozen.until = map[string]*time.Timer{}, map[string]time.Time{}
		}
		l.frozen.until[name] = time.Now().Add(l.freezeBound())
		l.frozen.timers[name] = time.AfterFunc(l.freezeBound(), func() {
			if err := l.thaw(f, name, "its bound"); err != nil { // logged: try again in a second
				l.frozen.mu.Lock()
				if t, ok := l.frozen.timers[name]; ok {
					t.Reset(time.Second)
				}
				l.frozen.mu.Unlock()
			}
		})
		l.cfg.Log.Info("a lesson froze a replica", "replica", name, "bound", l.freezeBound())
	}
	writeJSON(w, http.StatusOK, Frozen{Replica: name, Frozen: true, Until: l.frozen.until[name]})
}

// lessonThaw thaws the replica the path names if a lesson froze it; a
// replica it did not freeze is left as it is (a cell's, say).
func (l *Lab) lessonThaw(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("replica")
	f, why := l.freezer(r.Context())
	if f == nil {
		writeError(w, http.StatusServiceUnavailable, "no_freeze", "Could not thaw: "+why+".")
		return
	}
	if err := l.thaw(f, name, "the page"); err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "could not thaw "+name+": "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, Frozen{Replica: name})
}

// thaw resumes name if a lesson froze it (by: who asked, for the log).
func (l *Lab) thaw(f Freezer, name, by string) error {
	l.frozen.mu.Lock()
	defer l.frozen.mu.Unlock()
	t, ok := l.frozen.timers[name]
	if !ok {
		return nil
	}
	if err := f.Freeze(name, false); err != nil {
		l.cfg.Log.Error("a replica a lesson froze could not be thawed", "replica", name, "by", by, "err", err)
		return err // still frozen: its timer tries again, as does the page's next ask
	}
	t.Stop()
	delete(l.frozen.timers, name)
	delete(l.frozen.until, name)
	l.cfg.Log.Info("a lesson's frozen replica thawed", "replica", name, "by", by)
	return nil
}

// thawAll thaws every replica a lesson froze: the lab is closing.
func (l *Lab) thawAll() {
	l.frozen.mu.Lock()
	var names []string
	for name := range l.frozen.timers {
		names = append(names, name)
	}
	l.frozen.mu.Unlock()
	if len(names) == 0 {
		return
	}
	f, why := l.freezer(context.Background())
	if f == nil {
		l.cfg.Log.Error("replicas a lesson froze cannot be thawed", "replicas", names, "why", why)
		return
	}
	for _, name := range names {
		_ = l.thaw(f, name, "the lab closing") // logged
	}
}
