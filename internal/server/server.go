// Package server is the inventory service's HTTP API. Every reply is JSON, so a
// load test can classify each one, and every error maps to a status in one
// table (statusOf).
package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/google/uuid"
	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/history"
	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/origin"
	"github.com/locklab/locklab/internal/sale"
	"github.com/locklab/locklab/internal/step"
	"github.com/locklab/locklab/internal/versions"
)

// Seller is the sale service the handlers drive.
type Seller interface {
	Sell(ctx context.Context, m sale.Method) (sale.Result, error)
	Stock(ctx context.Context) (int64, error)
	SetStock(ctx context.Context, n int64) error
	Key() string
}

// Config holds the handlers' dependencies.
type Config struct {
	Seller Seller
	// Versions holds every version built for each variant the service
	// serves; Default is the variant of a request that asks for none.
	Versions map[versions.Variant]map[string]sale.Method
	Default  versions.Variant
	Names    []string // the version names, in order, for error messages
	Lock     string   // the default version
	LockKey  string   // reported by /healthz
	// Override lets /sale?lock=NAME and ?wait=WAY choose the version and its
	// wait per request, so one running cluster can be compared across them.
	Override bool
	// OverrideAdmin makes that choice the admin's: it needs the admin token
	// (when one is configured), for a replica reached beyond loopback, where
	// ?lock=none would let anyone oversell.
	OverrideAdmin bool
	Replica       string
	// Hosts are the names the replica answers to beside localhost and IP
	// addresses (its own host name, nginx's hop on Compose, a public name):
	// any other Host is refused, 421 (origin.Guard: DNS rebinding).
	Hosts      origin.Hosts
	AdminToken string // empty: admin endpoints open
	// Chaos enables the per-request fault hooks on /sale (hold,
	// release_pause, nested, fence), for the admin token only.
	Chaos bool
	// Steps, when set, lets /sale?step=ID run a sale that stops before each
	// of its steps, driven through /steps/{id} (the lab's lessons); its
	// clients must carry step.Hook. Like ?lock=, it needs the admin token on
	// a replica reached beyond loopback, and there a token must be set: a
	// stepped sale holds its lock for minutes.
	Steps *step.Gate
	// LessonLease, when set, is the lease of a stepped sale's lock: the
	// versions built with versions.Variant.Lease set to it (cmd/inventory
	// builds them). A learner stepping v4 by hand must be able to outlast
	// the lease while watching it run out, whatever -ttl says; the
	// replica's other sales keep -ttl.
	LessonLease time.Duration
	// Forget, when set, removes the lock a crashed stepped sale left in the
	// stock's Redis if it still holds owner (ForgetLock on the lock key):
	// a stepped sale of a version whose lock is that one key (v3-v8) may
	// then crash (POST /steps/{id}/crash), and the lesson's reset, the page
	// going away or the bound removes what it left.
	Forget func(ctx context.Context, owner string) (string, error)
	// Store, when set, reads what the store holds now for GET /store (the
	// lab's lessons show it between the two stepped sales).
	Store func(ctx context.Context) (api.Store, error)
	// Holders, when set, read the lock of the versions whose lock is not
	// the Redis lock key (etcd's queue, ZooKeeper's nodes, MariaDB's named
	// lock), by version: GET /store?lock=NAME answers it as its lock, so the
	// lessons of those families watch their own store (nil: nobody holds it).
	Holders  map[string]func(ctx context.Context) (*api.LockKey, error)
	Settings map[string]string               // the lock settings, shown by /healthz
	Ready    func(ctx context.Context) error // nil error: dependencies reachable
	Log      *slog.Logger
	// Recorder, when set, is told of every sale's outcome, and Metrics
	// serves GET /metrics.
	Recorder Recorder
	Metrics  http.Handler
	// History, when set, records every sale, served by GET /history (admin).
	History *history.Ring
	// MaxInFlight caps the sales one replica runs at once (waiting for the
	// lock or holding it); one more is answered 503 busy with Retry-After.
	// 0: DefaultMaxInFlight.
	MaxInFlight int
	// MaxOthersInFlight caps the other requests that do work (/stock,
	// /history, /metrics, /readyz) the same way, apart from the sales, so
	// that a flood there takes neither a sale's slot nor much memory.
	// 0: DefaultMaxOthersInFlight.
	MaxOthersInFlight int
}

// DefaultMaxInFlight is the default cap on a replica's sales in flight:
// above the bundled load test's concurrency (100), far below what would
// make the waiters' polling a load of its own.
const DefaultMaxInFlight = 256

// DefaultMaxOthersInFlight is the default cap on the other requests: a
// load test reads the history of each replica a page at a time, a
// healthcheck probes once a second; a history page is at most a few MB.
const DefaultMaxOthersInFlight = 16

// ErrShuttingDown is the cause with which the service cancels its requests'
// context when it stops: a sale still waiting for the lock gives up and is
// answered 503 shutting_down; one that holds the lock finishes.
var ErrShuttingDown = errors.New("the replica is shutting down")

// Recorder counts sales by outcome: "sold", or the reply's error code.
type Recorder interface {
	Sale(m sale.Method, outcome string)
}

type handlers struct {
	Config
}

// limit returns a middleware that runs at most n requests at once and
// answers 503 busy, at once, to one more; what names them in the reply.
func limit(n int, what string) func(http.Handler) http.Handler {
	slots := make(chan struct{}, n)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
				next.ServeHTTP(w, r)
			default:
				writeError(w, api.CodeBusy, fmt.Sprintf("this replica already runs %d %s: retry later", n, what))
			}
		})
	}
}

// requestID keeps a client's X-Request-Id when it is a plain token (letters,
// digits, ".", "_", ":", "-"; at most 128 bytes) and makes one up otherwise,
// so that what reaches the logs and the history is never a client's free
// text. The id is echoed in the reply.
func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(middleware.RequestIDHeader)
		if !validRequestID(id) {
			id = uuid.NewString()
		}
		w.Header().Set(middleware.RequestIDHeader, id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), middleware.RequestIDKey, id)))
	})
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range []byte(id) {
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._:-", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// New returns the service's routes.
func New(cfg Config) http.Handler {
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.MaxOthersInFlight <= 0 {
		cfg.MaxOthersInFlight = DefaultMaxOthersInFlight
	}
	h := &handlers{cfg}
	sales, others := limit(cfg.MaxInFlight, "sales"), limit(cfg.MaxOthersInFlight, "requests other than sales")
	r := chi.NewRouter()
	// The sale is POST only: a GET is what another site's image tag sends,
	// and origin.Guard lets every GET through.
	r.Use(requestID, origin.Guard(cfg.Hosts, "the replica"), middleware.Recoverer)
	r.With(sales).Post("/sale", h.sale)
	r.With(others).Get("/stock", h.stock)
	r.With(others, h.admin).Put("/stock", h.setStock)
	r.With(others, h.admin).Get("/history", h.history)
	r.With(others, h.admin).Get("/steps/{id}", h.stepState)
	r.With(others, h.admin).Post("/steps/{id}/next", h.stepNext)
	r.With(others, h.admin).Post("/steps/{id}/end", h.stepEnd)
	r.With(others, h.admin).Post("/steps/{id}/crash", h.stepCrash)
	r.With(others, h.admin).Post("/steps/{id}/pause", h.stepPause)
	r.With(others, h.admin).Post("/steps/{id}/resume", h.stepResume)
	r.With(others, h.admin).Delete("/steps/{id}", h.stepCancel)
	r.With(others, h.admin).Get("/store", h.store)
	r.Get("/healthz", h.healthz) // no I/O: answered from memory
	r.With(others).Get("/readyz", h.readyz)
	if cfg.Metrics != nil {
		r.With(others).Method(http.MethodGet, "/metrics", cfg.Metrics)
	}
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, api.CodeNotFound, "no such endpoint: "+r.URL.Path)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, api.CodeNotAllowed, r.Method+" is not allowed on "+r.URL.Path)
	})
	return r
}

func (h *handlers) sale(w http.ResponseWriter, r *http.Request) {
	ctx, m, rerr := h.choose(r)
	if rerr != nil {
		writeError(w, rerr.code, rerr.msg)
		return
	}
	if r.URL.Query().Has("step") {
		h.startStepped(w, r, ctx, m)
		return
	}
	status, reply := h.sell(ctx, r, m)
	writeJSON(w, status, reply)
}

// sell runs one sale and returns its reply and the reply's status.
func (h *handlers) sell(ctx context.Context, r *http.Request, m sale.Method) (int, api.Sale) {
	reply := api.Sale{Lock: m.Name, Replica: h.Replica}
	start := time.Now()
	res, err := h.Seller.Sell(ctx, m)
	defer func() { h.remember(r, m, start, res.Trace, reply.Code) }()
	if err != nil {
		code := codeOf(err)
		if code == api.CodeClientGone && errors.Is(context.Cause(ctx), ErrShuttingDown) {
			code = api.CodeShuttingDown
		}
		h.record(m, code)
		reply.Error, reply.Code = err.Error(), code
		if code == api.CodeSoldOut {
			zero := int64(0)
			reply.Remaining = &zero
		} else {
			h.Log.Warn("sale failed", "lock", m.Name, "code", code, "err", err,
				"request_id", middleware.GetReqID(r.Context()))
		}
		return api.Status(code), reply
	}
	h.record(m, api.Sold)
	reply.Sold, reply.Remaining = true, &res.Remaining
	if res.ReleaseErr != nil {
		reply.Warning = "sold, but releasing the lock failed: " + res.ReleaseErr.Error()
		if errors.Is(res.ReleaseErr, lease.ErrNotHeld) {
			reply.Warning = "sold, but the lock was not held at release: " + res.ReleaseErr.Error()
		}
		h.Log.Warn("release failed after a sale", "lock", m.Name, "err", res.ReleaseErr,
			"request_id", middleware.GetReqID(r.Context()))
	}
	h.Log.Debug("sold", "lock", m.Name, "remaining", res.Remaining)
	return http.StatusOK, reply
}

// choose reads /sale's query: ?lock=NAME and ?wait=WAY (both need
// -lock-override), and the fault hooks (see faults). It returns the request's
// context, carrying the faults, and the version to sell with.
func (h *handlers) choose(r *http.Request) (context.Context, sale.Method, *requestError) {
	q := r.URL.Query()
	for _, p := range []string{"lock", "wait"} {
		if q.Has(p) && !h.Override {
			return nil, sale.Method{}, &requestError{api.CodeOverrideDisabled,
				fmt.Sprintf("choosing the %s per request is disabled: start the service with -lock-override", p)}
		}
		if q.Has(p) && h.OverrideAdmin && h.AdminToken != "" && !h.authorized(r) {
			return nil, sale.Method{}, &requestError{api.CodeUnauthorized,
				fmt.Sprintf("choosing the %s per request needs the admin token on a replica reached beyond this machine: send Authorization: Bearer <token>", p)}
		}
	}
	variant, name := h.Default, h.Lock
	if q.Has("lock") {
		name = q.Get("lock")
	}
	if q.Has("wait") {
		variant.Wait = q.Get("wait")
		if !slices.Contains(versions.Waits, variant.Wait) {
			return nil, sale.Method{}, &requestError{api.CodeUnknownWait,
				fmt.Sprintf("unknown wait %q: want one of %s", variant.Wait, strings.Join(versions.Waits, " "))}
		}
	}
	f, nested, fence, rerr := h.faults(r, q)
	if rerr != nil {
		return nil, sale.Method{}, rerr
	}
	if fence != nil {
		variant.Fence = *fence
	}
	if q.Has("step") && h.LessonLease > 0 {
		variant.Lease = h.LessonLease
	}
	m, ok := h.Versions[variant][name]
	if !ok {
		if _, known := h.Versions[h.Default][name]; known {
			return nil, sale.Method{}, &requestError{api.CodeBadRequest,
				fmt.Sprintf("wait %s with fencing %t is not served here", variant.Wait, variant.Fence)}
		}
		return nil, sale.Method{}, &requestError{api.CodeUnknownLock,
			fmt.Sprintf("unknown lock %q: want one of %s", name, strings.Join(h.Names, " "))}
	}
	if fence != nil && *fence && m.Fence == "" {
		return nil, sale.Method{}, &requestError{api.CodeBadRequest, fmt.Sprintf("lock %s cannot hand out fencing tokens", m.Name)}
	}
	if f.Lease > 0 && !m.LeaseHook {
		return nil, sale.Method{}, &requestError{api.CodeBadRequest, fmt.Sprintf("lock %s takes no lease per request (lease= is for redlock)", m.Name)}
	}
	m.Nested = m.Nested || nested
	return chaos.With(r.Context(), f), m, nil
}

// admin requires the admin token as a bearer token, when one is configured.
func (h *handlers) admin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.AdminToken != "" && !h.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="locklab"`)
			writeError(w, api.CodeUnauthorized, "admin token required: send Authorization: Bearer <token>")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authorized reports whether r carries the admin token.
func (h *handlers) authorized(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && h.AdminToken != "" && subtle.ConstantTimeCompare([]byte(got), []byte(h.AdminToken)) == 1
}

// healthz reports the replica's keys and lock settings, so a load test can
// report what it measured against and no tool hard-codes a key.
func (h *handlers) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, api.Health{Status: "ok", Replica: h.Replica, StockKey: h.Seller.Key(), LockKey: h.LockKey, Settings: h.Settings})
}

func (h *handlers) readyz(w http.ResponseWriter, r *http.Request) {
	if err := h.Ready(r.Context()); err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready", "replica": h.Replica})
}
