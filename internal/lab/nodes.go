package lab

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/api"
)

// Redlock's restart story stops a Redis node, kills one and starts it
// again, as the redlock-restart cell does: the local cluster starts its
// nodes without persistence, so a node started again has forgotten every
// key, the lock's among them. A lesson stops only the nodes Redlock alone
// uses (never the stock's, which every sale and the store's reading need),
// and every node it stopped is started again (faults.go): when the page
// asks, at the reset and when the page goes away, at NodeBound, and when
// the lab closes.

// Killer kills a Redis node of the stack (SIGKILL, as a crash would) and
// answers what starts it again, empty, once it answers: the local
// cluster's (package cluster), which the lab's Freezer also is.
type Killer interface {
	Kill(name string) (restart func(context.Context) error, err error)
	// RedlockOnly names the Redis nodes only Redlock uses: every node
	// but the stock's.
	RedlockOnly() []string
}

// NodeBound is the longest a lesson keeps a Redis node stopped: the whole
// of a story told by a person reading each step (the fix keeps one node
// down over four of them), well inside a stepped sale's bound.
const NodeBound = time.Minute

// nodeTimeout bounds a node's start: its restart waits until the old
// process is gone, then until the new one answers PING.
const nodeTimeout = 30 * time.Second

// NodeState is what a node action answers.
type NodeState struct {
	Node  string    `json:"node"`
	Down  bool      `json:"down"`
	Until time.Time `json:"until,omitzero"` // when the lab starts it again by itself
}

// stoppedNode is what the lab holds a stopped node as.
func stoppedNode(name string) string { return "node " + name }

// killer is the stack's Killer, or why there is none.
func (l *Lab) killer(ctx context.Context) (Killer, string) { return asKiller(l.freezer(ctx)) }

// asKiller is f as a Killer, or why it is none (why: why there is no f).
func asKiller(f Freezer, why string) (Killer, string) {
	if f == nil {
		return nil, why
	}
	k, ok := f.(Killer)
	if !ok {
		return nil, "this lab's stack can freeze a process but not stop a node"
	}
	return k, ""
}

// lessonNode stops ("stop"), starts again ("start") or kills and starts
// again at once ("restart": a crash and a restart without persistence) the
// Redis node the path names. Refused while a run or a cell uses the stack,
// where the lab cannot stop a node (503, saying why and the command), and
// for a node a lesson may not stop (404, naming those it may).
func (l *Lab) lessonNode(w http.ResponseWriter, r *http.Request) {
	name, do := r.PathValue("node"), r.PathValue("do")
	if do != "stop" && do != "start" && do != "restart" {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "a node is stopped, started or restarted, not "+do)
		return
	}
	if do == "start" { // always allowed: it puts right what a lesson did
		if err := l.undo(stoppedNode(name), "the page"); err != nil {
			writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "could not start "+name+" again: "+err.Error())
			return
		}
		writeJSON(w, http.StatusOK, NodeState{Node: name})
		return
	}
	k, why := l.killer(r.Context())
	if k == nil {
		writeError(w, http.StatusServiceUnavailable, "no_freeze", "Could not stop a node: "+why+", start "+freezeCommand+".")
		return
	}
	if nodes := k.RedlockOnly(); !slices.Contains(nodes, name) {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "a lesson stops only the Redis nodes Redlock alone uses ("+strings.Join(nodes, ", ")+"), not "+name)
		return
	}
	what := stoppedNode(name)
	l.holdOnce(w, "stops a Redis node it uses", what, l.nodeBound(), func() (func() error, error) {
		// One cluster for every node a lesson holds stopped: each restart
		// saves the cluster's state (the node's new pid), and one read
		// before another node's restart would save that one's old pid.
		if l.held.killer != nil {
			k = l.held.killer
		}
		restart, err := k.Kill(name)
		if err != nil {
			return nil, errors.New("could not stop " + name + ": " + err.Error())
		}
		l.held.killer = k
		return func() error {
			ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
			defer cancel()
			return restart(ctx)
		}, nil
	}, func(w http.ResponseWriter, until time.Time) {
		if do == "restart" { // still under l.held.mu: no other fault between
			if err := l.undoLocked(what, "the page"); err != nil {
				writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "could not start "+name+" again: "+err.Error())
				return
			}
			writeJSON(w, http.StatusOK, NodeState{Node: name})
			return
		}
		writeJSON(w, http.StatusOK, NodeState{Node: name, Down: true, Until: until})
	})
}

// nodeBound is the lab's bound: Config.NodeBound, or NodeBound.
func (l *Lab) nodeBound() time.Duration {
	if l.cfg.NodeBound > 0 {
		return l.cfg.NodeBound
	}
	return NodeBound
}

// startNodes starts again every node a lesson stopped.
func (l *Lab) startNodes(by string) error {
	return l.undoAll(by, func(what string) bool { return strings.HasPrefix(what, stoppedNode("")) })
}
