package lab

import (
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/locklab/locklab/internal/api"
)

// A lesson may freeze a replica's whole process (SIGSTOP), as a long GC
// pause freezes it: the etcd and ZooKeeper stories' paused holder. Their
// session keep-alives are sent by the replica's client for all its sales,
// not through the sale's step gate, so only freezing the process stops
// them. A frozen replica answers nothing, so the lab thaws it whatever
// happens (faults.go): when the page asks (its next step, its reset,
// pagehide), at its bound (FreezeBound), and when the lab closes.

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

// Frozen is what a freeze or thaw answers.
type Frozen struct {
	Replica string    `json:"replica"`
	Frozen  bool      `json:"frozen"`
	Until   time.Time `json:"until,omitzero"` // when the lab thaws it by itself
}

// frozenReplica is what the lab holds a frozen replica as.
func frozenReplica(name string) string { return "replica " + name }

// isFrozen says whether a lesson froze replica and has not thawed it.
func (l *Lab) isFrozen(replica string) bool { return l.has(frozenReplica(replica)) }

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
	l.holdOnce(w, "freezes a replica it uses", frozenReplica(name), l.freezeBound(), func() (func() error, error) {
		if err := f.Freeze(name, true); err != nil {
			// Half stopped is still stopped: resume whatever it reached.
			if cerr := f.Freeze(name, false); cerr != nil {
				l.cfg.Log.Error("a replica a lesson froze could not be thawed: fix it by hand", "replica", name, "err", cerr)
			}
			return nil, errors.New("could not freeze " + name + ": " + err.Error())
		}
		return func() error { return f.Freeze(name, false) }, nil
	}, func(w http.ResponseWriter, until time.Time) {
		writeJSON(w, http.StatusOK, Frozen{Replica: name, Frozen: true, Until: until})
	})
}

// lessonThaw thaws the replica the path names if a lesson froze it; a
// replica it did not freeze is left as it is (a cell's, say).
func (l *Lab) lessonThaw(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("replica")
	if f, why := l.freezer(r.Context()); f == nil {
		writeError(w, http.StatusServiceUnavailable, "no_freeze", "Could not thaw: "+why+".")
		return
	}
	if err := l.thaw(name, "the page"); err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "could not thaw "+name+": "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, Frozen{Replica: name})
}

// thaw resumes name if a lesson froze it (by: who asked, for the log).
func (l *Lab) thaw(name, by string) error { return l.undo(frozenReplica(name), by) }
