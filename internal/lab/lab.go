// Package lab is the lab on port 80: one page, served by its own process
// behind nginx, where a learner starts runs of the load test against the real
// stack and watches them happen: the stock going down, every hold of the lock
// as a bar in its replica's lane, overlapping holds in red, and at the end
// the checker's verdict.
//
// It drives the load test (package loadtest), whose checker judges each run;
// nothing here generates load or checks a history a second time. While a run
// goes, it follows the replicas' history live (GET /history?after=SEQ) and
// streams what it finds to the page by Server-Sent Events, a batch every
// tick, so a thousand sales a second are a few messages. The page only draws
// the data; a run can be downloaded as JSON and its report opened.
package lab

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/client"
	"github.com/locklab/locklab/internal/lesson"
	"github.com/locklab/locklab/internal/origin"
	"github.com/locklab/locklab/internal/scenario"
	"github.com/locklab/locklab/internal/versions"
)

//go:embed static
var static embed.FS

// Config is what the lab runs against, and who may use it.
type Config struct {
	// SaleURL is the stack's /sale through nginx: the load test's target.
	SaleURL string
	// Replicas names the replicas (nginx's /replica/NAME/ routes): their
	// health and history are read there.
	Replicas []string
	// ReplicasFrom, when set (host:port, see CheckReplicasFrom), finds the
	// replicas instead of Replicas: every address the host has in DNS now,
	// each named by its /healthz (a Compose or Swarm service of any size).
	ReplicasFrom string
	// AdminToken is the service's admin token (PUT /stock, GET /history,
	// the fault hooks): the lab's own credential, never sent to the page.
	AdminToken string
	// Token, when set, is required (Authorization: Bearer) of every request
	// that starts or stops something. It must be set whenever the lab or
	// nginx in front of it listens beyond loopback (cmd/lab refuses
	// otherwise).
	Token string
	// Hosts are the Host names the lab answers to (any port) beside
	// localhost, *.localhost and IP addresses, as nginx does. Any other
	// Host is refused (421): a page of another site that rebinds its name
	// to this machine (DNS rebinding) sends its name, and cannot read the
	// lab; an address is no such name.
	Hosts []string
	// Nodes are the stack's other nodes whose health the page shows (Redis
	// nodes, etcd members); the replicas and nginx are always shown.
	Nodes []Node
	// Tick is how often the page is sent what changed; default 200 ms.
	Tick time.Duration
	// Cells, when set, makes the Env the scenario cells run against (the
	// local cluster's: its processes, its nodes); nil: the page runs no
	// cells.
	Cells func(context.Context) (scenario.Env, error)
	// FixByHand says how a person puts right a fault a cell or a run could
	// not undo on this stack (the local cluster's commands); nil: the page
	// names the node and what is left, without the how.
	FixByHand func(*scenario.NotUndone) string
	// Freezer, when set, makes what freezes and thaws the stack's
	// processes (the local cluster's): the lessons that freeze a replica.
	// nil: the page does not offer them, and says why.
	Freezer func(context.Context) (Freezer, error)
	// FreezeBound is the longest a lesson keeps a replica frozen (0:
	// FreezeBound).
	FreezeBound time.Duration
	// NodeBound is the longest a lesson keeps a Redis node stopped (0:
	// NodeBound); the node is stopped through Freezer, when it is also a
	// Killer.
	NodeBound time.Duration
	Log       *slog.Logger
}

// Node is a node of the stack the lab watches: Kind "redis" (PING), "etcd"
// (GET /health), "zookeeper" (srvr) or "mariadb" (its greeting), at Addr
// (host:port).
type Node struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	Addr string `json:"addr"`
}

// Limits bound what one run may ask for.
const (
	MaxRequests    = 8000 // over every version of a run: each replica keeps 5,000 sales (-history), and the verdict needs them all
	MaxConcurrency = 256
	MaxStock       = 1_000_000
	maxBody        = 64 << 10
	keptRuns       = 10
)

// Lab serves the page and its API. Safe for concurrent use.
type Lab struct {
	cfg   Config
	hosts origin.Hosts
	http  *http.Client // the lessons' proxy (steps.go) and etcd's health
	// svc calls the service through nginx (nil, and svcErr: why SaleURL
	// gives none).
	svc    *client.Client
	svcErr error
	hub    *hub
	stack  *stack
	found  *replicaFinder

	cells cells
	held  held // the faults a lesson put on the stack: frozen replicas, stopped nodes

	rev atomic.Int64 // stamps what the lab says of its runs and cells (summary.Rev)

	mu      sync.Mutex
	busy    string // what runs now ("run ID", "cell S/LOCK"); "": nothing
	busyID  string
	running *run   // the run that runs now; nil: none (or a cell)
	runs    []*run // the last keptRuns, oldest first
	cancel  context.CancelFunc
	done    chan struct{} // closed when what runs has ended
}

// New returns a Lab; Close stops what it runs in the background.
func New(cfg Config) *Lab {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 200 * time.Millisecond
	}
	l := &Lab{cfg: cfg, hosts: origin.NewHosts(cfg.Hosts...), http: &http.Client{Timeout: 10 * time.Second}, hub: newHub()}
	l.svc, l.svcErr = client.ForSale(cfg.SaleURL, cfg.AdminToken) // an error: every call through nginx says why
	l.found = newReplicaFinder(cfg, client.New("", cfg.AdminToken))
	l.stack = newStack(cfg, l.hub, l.http, l.found.find, l.service)
	return l
}

// service is the client of the service through nginx, or why there is none.
func (l *Lab) service() (*client.Client, error) { return l.svc, l.svcErr }

// health is what the replica nginx hands the request to says on /healthz.
func (l *Lab) health(ctx context.Context) (api.Health, error) {
	if l.svcErr != nil {
		return api.Health{}, l.svcErr
	}
	return l.svc.Health(ctx)
}

// Close cancels a running run and waits for it to end (its faults undone,
// its lock released by the service), and stops watching the stack.
func (l *Lab) Close() {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	_ = l.undoAll("the lab closing", nil) // logged
	l.stack.close()
	l.closeCells()
	l.hub.close() // every page's stream ends: a server stopping waits for none
}

// claim takes the one slot for what (kind "run" or "cell", and its id):
// one run or cell at a time, and a 409 naming the one that runs. done
// frees the slot.
func (l *Lab) claim(w http.ResponseWriter, kind, id string) (context.Context, func(), bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.busy != "" {
		writeJSON(w, http.StatusConflict, map[string]string{"error": l.busy + " is running: one at a time (stop it, or wait)", "code": "busy", "running": l.busyID})
		return nil, nil, false
	}
	if held := l.holding(); len(held) > 0 { // the run would fault, or measure, a stack a lesson has faulted
		writeError(w, http.StatusConflict, "busy", "a lesson holds "+strings.Join(held, ", ")+": reset it first (the lab undoes it by itself within a minute)")
		return nil, nil, false
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	l.busy, l.busyID, l.cancel, l.done = kind+" "+id, id, cancel, done
	return ctx, func() {
		cancel()
		l.mu.Lock()
		l.busy, l.busyID, l.cancel, l.running = "", "", nil, nil
		l.mu.Unlock()
		close(done)
	}, true
}

// Handler is the lab's HTTP handler: the page at /, its files and API
// under /lab/.
func (l *Lab) Handler() http.Handler {
	mux := http.NewServeMux()
	files, _ := fs.Sub(static, "static")
	mux.HandleFunc("GET /{$}", l.page)
	// The page's views, each at its own address (lab.js draws the one named).
	for _, view := range []string{"lessons", "lessons/{version}", "runs", "runs/{id}", "faults", "libraries", "stack"} {
		mux.HandleFunc("GET /lab/"+view, l.page)
	}
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "static/favicon.svg")
	})
	mux.Handle("GET /lab/static/", http.StripPrefix("/lab/static/", http.FileServerFS(files)))
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /lab/api/config", l.config)
	mux.HandleFunc("GET /lab/api/code/{version}", code)
	mux.HandleFunc("GET /lab/api/events", l.events)
	mux.HandleFunc("GET /lab/api/runs", l.list)
	mux.HandleFunc("POST /lab/api/runs", l.start)
	mux.HandleFunc("DELETE /lab/api/runs/current", l.stop)
	mux.HandleFunc("GET /lab/api/runs/{id}", l.get)
	mux.HandleFunc("GET /lab/api/runs/{id}/report", l.report)
	mux.HandleFunc("GET /lab/api/scenarios", l.scenarios)
	mux.HandleFunc("POST /lab/api/cells", l.runCell)
	mux.HandleFunc("GET /lab/api/cells/{scenario}/{lock}", l.cell)
	mux.HandleFunc("POST /lab/api/lesson/{replica}/sale", l.lessonStart)
	mux.HandleFunc("GET /lab/api/lesson/{replica}/steps/{id}", l.lessonStep)
	mux.HandleFunc("DELETE /lab/api/lesson/{replica}/steps/{id}", l.lessonStep)
	mux.HandleFunc("POST /lab/api/lesson/{replica}/steps/{id}/{do}", l.lessonStep)
	mux.HandleFunc("GET /lab/api/lesson/store", l.lessonStore)
	mux.HandleFunc("POST /lab/api/lesson/{replica}/freeze", l.lessonFreeze)
	mux.HandleFunc("POST /lab/api/lesson/{replica}/thaw", l.lessonThaw)
	mux.HandleFunc("POST /lab/api/lesson/nodes/{node}/{do}", l.lessonNode)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no such page: "+r.URL.Path)
	})
	return l.guard(mux)
}

// guard refuses what the lab must not answer: a Host it does not serve
// (421: DNS rebinding) or a state-changing request from another site (403),
// both by origin.Guard as the replicas do; and without the token when one is
// set (401).
func (l *Lab) guard(next http.Handler) http.Handler {
	token := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !origin.Safe(r.Method) && l.cfg.Token != "" &&
			subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+l.cfg.Token)) != 1 {
			writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, "the lab listens beyond loopback: starting or stopping a run needs its token (Authorization: Bearer ...)")
			return
		}
		next.ServeHTTP(w, r)
	})
	return origin.Guard(l.hosts, "the lab")(token)
}

func (l *Lab) page(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	http.ServeFileFS(w, r, static, "static/index.html")
}

// config is what the page needs to draw its form: the versions and waits,
// the limits, whether a token is needed, and whether a lesson may freeze a
// replica or stop a Redis node here (why not, and the command that starts
// a stack where it may).
func (l *Lab) config(w http.ResponseWriter, r *http.Request) {
	f, why := l.freezer(r.Context())
	k, whyNodes := asKiller(f, why)
	var nodes []string
	if k != nil {
		nodes = k.RedlockOnly()
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"freeze": map[string]any{"available": why == "", "why": why, "command": freezeCommand, "bound_ms": l.freezeBound().Milliseconds()},
		"nodes": map[string]any{"available": whyNodes == "", "why": whyNodes, "command": freezeCommand, "bound_ms": l.nodeBound().Milliseconds(),
			"names": nodes},
		"versions": versions.All, "waits": versions.Waits, "showcase": versions.Showcase, "replicas": l.found.find(r.Context()),
		"token_required": l.cfg.Token != "",
		"limits":         map[string]int{"requests": MaxRequests, "concurrency": MaxConcurrency, "stock": MaxStock},
	})
}

// code answers a version's code for its lesson, as the service runs it
// (package lesson): the lines marked as what makes it what it is, their
// diff against the version it follows, and the whole files they are in,
// embedded when the lab was built.
func code(w http.ResponseWriter, r *http.Request) {
	v := r.PathValue("version")
	l, ok := lesson.For(v)
	if !ok {
		writeError(w, http.StatusNotFound, api.CodeUnknownLock, fmt.Sprintf("no version %q: want one of %s", v, strings.Join(versions.Names(), " ")))
		return
	}
	writeJSON(w, http.StatusOK, l)
}

func (l *Lab) list(w http.ResponseWriter, _ *http.Request) {
	l.mu.Lock()
	out := make([]summary, 0, len(l.runs))
	for _, r := range slices.Backward(l.runs) {
		out = append(out, r.summary())
	}
	l.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (l *Lab) find(id string) *run {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.runs {
		if r.ID == id {
			return r
		}
	}
	return nil
}

// get is a run's evidence, as JSON: its settings, each version's result
// (the load test's, with the checker's verdict) and every hold it saw.
func (l *Lab) get(w http.ResponseWriter, r *http.Request) {
	run := l.find(r.PathValue("id"))
	if run == nil {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no such run (the lab keeps the last "+fmt.Sprint(keptRuns)+")")
		return
	}
	if r.URL.Query().Has("download") {
		w.Header().Set("Content-Disposition", `attachment; filename="locklab-run-`+run.ID+`.json"`)
	}
	writeJSON(w, http.StatusOK, run.snapshot())
}

// report is a run's full report: the load test's own HTML report.
func (l *Lab) report(w http.ResponseWriter, r *http.Request) {
	run := l.find(r.PathValue("id"))
	if run == nil {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no such run")
		return
	}
	html, err := run.reportHTML()
	switch {
	case err != nil:
		l.cfg.Log.Warn("writing a report", "run", run.ID, "err", err)
		writeError(w, http.StatusInternalServerError, "report_failed", "the report could not be written: "+err.Error())
		return
	case html == nil:
		writeError(w, http.StatusConflict, "running", "the run is still going: its report is written when it ends")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(html)
}

// decode reads a JSON body of at most maxBody bytes into v, refusing
// unknown fields and trailing data.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("the body is not the expected JSON: %w", err)
	}
	if dec.More() {
		return errors.New("the body has more after its JSON object")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]string{"error": msg, "code": code})
}
