// Package server is the inventory service's HTTP API. Every reply is JSON, so a
// load test can classify each one, and every error maps to a status in one
// table (statusOf).
package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/sale"
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
	Seller  Seller
	Methods map[string]sale.Method // every version by name, waiting the default way
	Names   []string               // the names, in order, for error messages
	Lock    string                 // the default version
	// Waits holds every version built for each way of waiting ("poll",
	// "notify"), for /sale?wait=WAY with Override; Wait is the default way.
	Waits map[string]map[string]sale.Method
	Wait  string
	// Override lets /sale?lock=NAME choose the version per request, so one
	// running cluster can be compared across versions.
	Override   bool
	Replica    string
	AdminToken string // empty: admin endpoints open
	// Chaos enables the per-request fault hooks on /sale (hold,
	// release_pause, nested), for the admin token only.
	Chaos    bool
	Settings map[string]string               // the lock settings, shown by /healthz
	Ready    func(ctx context.Context) error // nil error: dependencies reachable
	Log      *slog.Logger
	// Recorder, when set, is told of every sale's outcome, and Metrics
	// serves GET /metrics.
	Recorder Recorder
	Metrics  http.Handler
}

// Recorder counts sales by outcome: "sold", or the reply's error code.
type Recorder interface {
	Sale(m sale.Method, outcome string)
}

type handlers struct{ Config }

// New returns the service's routes.
func New(cfg Config) http.Handler {
	h := &handlers{cfg}
	r := chi.NewRouter()
	r.Use(middleware.RequestID, middleware.Recoverer)
	r.Get("/sale", h.sale)
	r.Post("/sale", h.sale)
	r.Get("/stock", h.stock)
	r.With(h.admin).Put("/stock", h.setStock)
	r.Get("/healthz", h.healthz)
	r.Get("/readyz", h.readyz)
	if cfg.Metrics != nil {
		r.Method(http.MethodGet, "/metrics", cfg.Metrics)
	}
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, errorBody{Error: "no such endpoint: " + r.URL.Path, Code: "not_found"})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusMethodNotAllowed, errorBody{Error: r.Method + " is not allowed on " + r.URL.Path, Code: "method_not_allowed"})
	})
	return r
}

type saleReply struct {
	Sold      bool   `json:"sold"`
	Remaining *int64 `json:"remaining,omitempty"`
	Lock      string `json:"lock"`
	Replica   string `json:"replica"`
	Error     string `json:"error,omitempty"`
	Code      string `json:"code,omitempty"`
	// Warning reports a sale that went through while its lock did not hold to
	// the end (the lease expired before release): the unit is sold, but
	// another holder may have overlapped it.
	Warning string `json:"warning,omitempty"`
}

type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

func (h *handlers) sale(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	m, cerr := h.choose(q)
	if cerr != nil {
		writeJSON(w, cerr.status, errorBody{Error: cerr.msg, Code: cerr.code})
		return
	}
	ctx, m, ferr := h.faults(r, q, m)
	if ferr != nil {
		writeJSON(w, ferr.status, errorBody{Error: ferr.msg, Code: ferr.code})
		return
	}

	name := m.Name
	reply := saleReply{Lock: name, Replica: h.Replica}
	res, err := h.Seller.Sell(ctx, m)
	if err != nil {
		status, code := statusOf(err)
		h.record(m, code)
		reply.Error, reply.Code = err.Error(), code
		if code == "sold_out" {
			zero := int64(0)
			reply.Remaining = &zero
		} else {
			h.Log.Warn("sale failed", "lock", name, "status", status, "code", code, "err", err,
				"request_id", middleware.GetReqID(r.Context()))
		}
		if status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		writeJSON(w, status, reply)
		return
	}
	h.record(m, "sold")
	reply.Sold, reply.Remaining = true, &res.Remaining
	if res.ReleaseErr != nil {
		reply.Warning = "sold, but the lock was not held at release: " + res.ReleaseErr.Error()
		h.Log.Warn("lock lost before release", "lock", name, "err", res.ReleaseErr,
			"request_id", middleware.GetReqID(r.Context()))
	}
	h.Log.Debug("sold", "lock", name, "remaining", res.Remaining)
	writeJSON(w, http.StatusOK, reply)
}

// choose reads /sale's ?lock=NAME and ?wait=WAY (both need -lock-override)
// and returns the version to sell with.
func (h *handlers) choose(q url.Values) (sale.Method, *requestError) {
	for _, p := range []string{"lock", "wait"} {
		if q.Has(p) && !h.Override {
			return sale.Method{}, &requestError{http.StatusBadRequest, "override_disabled",
				fmt.Sprintf("choosing the %s per request is disabled: start the service with -lock-override", p)}
		}
	}
	name, methods := h.Lock, h.Methods
	if q.Has("lock") {
		name = q.Get("lock")
	}
	if q.Has("wait") {
		var ok bool
		if methods, ok = h.Waits[q.Get("wait")]; !ok {
			return sale.Method{}, &requestError{http.StatusBadRequest, "unknown_wait",
				fmt.Sprintf("unknown wait %q: want one of %s", q.Get("wait"), strings.Join(slices.Sorted(maps.Keys(h.Waits)), " "))}
		}
	}
	m, ok := methods[name]
	if !ok {
		return sale.Method{}, &requestError{http.StatusBadRequest, "unknown_lock",
			fmt.Sprintf("unknown lock %q: want one of %s", name, strings.Join(h.Names, " "))}
	}
	return m, nil
}

func (h *handlers) record(m sale.Method, outcome string) {
	if h.Recorder != nil {
		h.Recorder.Sale(m, outcome)
	}
}

// faults reads the fault hooks of a /sale request: hold=DURATION (this sale's
// business time), release_pause=DURATION (a pause at the release's last moment
// before it deletes the lock), nested=1 (take the lock twice) and fence=1|0
// (fencing on or off for this sale, whatever -fence says). They need
// -chaos and the admin token; a request without them is untouched.
func (h *handlers) faults(r *http.Request, q url.Values, m sale.Method) (context.Context, sale.Method, *requestError) {
	if !q.Has("hold") && !q.Has("release_pause") && !q.Has("nested") && !q.Has("fence") {
		return r.Context(), m, nil
	}
	if !h.Chaos {
		return nil, m, &requestError{http.StatusBadRequest, "chaos_disabled", "fault hooks (hold, release_pause, nested) need the service started with -chaos"}
	}
	if !h.authorized(r) {
		return nil, m, &requestError{http.StatusUnauthorized, "unauthorized", "fault hooks need the admin token: send Authorization: Bearer <token>"}
	}
	var f chaos.Faults
	for _, p := range []struct {
		name string
		set  func(time.Duration)
	}{
		{"hold", func(d time.Duration) { f.Hold = d }},
		{"release_pause", func(d time.Duration) { f.BeforeDelete = chaos.Sleep(d) }},
	} {
		if !q.Has(p.name) {
			continue
		}
		d, err := time.ParseDuration(q.Get(p.name))
		if err != nil || d <= 0 || d > maxFault {
			return nil, m, &requestError{http.StatusBadRequest, "bad_request", fmt.Sprintf("%s=%q: want a duration in (0, %s]", p.name, q.Get(p.name), maxFault)}
		}
		p.set(d)
	}
	if q.Has("nested") {
		nested, err := strconv.ParseBool(q.Get("nested"))
		if err != nil {
			return nil, m, &requestError{http.StatusBadRequest, "bad_request", fmt.Sprintf("nested=%q: want 1 or 0", q.Get("nested"))}
		}
		m.Nested = m.Nested || nested
	}
	if q.Has("fence") {
		fenced, err := strconv.ParseBool(q.Get("fence"))
		if err != nil {
			return nil, m, &requestError{http.StatusBadRequest, "bad_request", fmt.Sprintf("fence=%q: want 1 or 0", q.Get("fence"))}
		}
		if _, ok := m.Guard.(sale.FencedGuard); fenced && !ok {
			return nil, m, &requestError{http.StatusBadRequest, "bad_request", fmt.Sprintf("lock %s cannot hand out fencing tokens", m.Name)}
		}
		m.Fence = fenced
	}
	return chaos.With(r.Context(), f), m, nil
}

// requestError is a request refused before any work: its status, code and message.
type requestError struct {
	status    int
	code, msg string
}

// maxFault bounds a fault hook's duration, so no request can hang a replica.
const maxFault = 5 * time.Minute

// statusOf is the one table from errors to HTTP statuses.
func statusOf(err error) (status int, code string) {
	switch {
	case errors.Is(err, sale.ErrSoldOut):
		return http.StatusConflict, "sold_out"
	case errors.Is(err, sale.ErrLockTimeout):
		return http.StatusServiceUnavailable, "lock_timeout"
	case errors.Is(err, sale.ErrStockMissing):
		return http.StatusServiceUnavailable, "stock_missing"
	case errors.Is(err, sale.ErrFenced):
		// Its own status: 409 is "sold out" to every client of this API.
		return http.StatusPreconditionFailed, "fenced"
	case errors.Is(err, sale.ErrStockCorrupt):
		return http.StatusInternalServerError, "stock_corrupt"
	case errors.Is(err, context.Canceled):
		return 499, "client_gone" // nginx's code for a client that closed the request
	default:
		// Redis or the network: a failed dependency.
		return http.StatusServiceUnavailable, "unavailable"
	}
}

type stockBody struct {
	Key   string `json:"key"`
	Stock int64  `json:"stock"`
}

func (h *handlers) stock(w http.ResponseWriter, r *http.Request) {
	n, err := h.Seller.Stock(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, stockBody{Key: h.Seller.Key(), Stock: n})
}

func (h *handlers) setStock(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Stock *int64 `json:"stock"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<10))
	dec.DisallowUnknownFields()
	err := dec.Decode(&body)
	if err == nil && dec.Decode(&struct{}{}) != io.EOF {
		err = errors.New("trailing data after the JSON object")
	}
	switch {
	case err != nil:
		writeJSON(w, http.StatusBadRequest, errorBody{Error: `want {"stock": N} with N a whole number >= 0: ` + err.Error(), Code: "bad_request"})
		return
	case body.Stock == nil:
		writeJSON(w, http.StatusBadRequest, errorBody{Error: `want {"stock": N}: "stock" is missing`, Code: "bad_request"})
		return
	case *body.Stock < 0:
		writeJSON(w, http.StatusBadRequest, errorBody{Error: fmt.Sprintf("stock must be >= 0, got %d", *body.Stock), Code: "bad_request"})
		return
	}
	if err := h.Seller.SetStock(r.Context(), *body.Stock); err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, stockBody{Key: h.Seller.Key(), Stock: *body.Stock})
}

// admin requires the admin token as a bearer token, when one is configured.
func (h *handlers) admin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.AdminToken != "" && !h.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="locklab"`)
			writeJSON(w, http.StatusUnauthorized, errorBody{Error: "admin token required: send Authorization: Bearer <token>", Code: "unauthorized"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// healthz also shows the replica's lock settings, so a load test can report
// what it measured against.
// authorized reports whether r carries the admin token.
func (h *handlers) authorized(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && h.AdminToken != "" && subtle.ConstantTimeCompare([]byte(got), []byte(h.AdminToken)) == 1
}

func (h *handlers) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Status   string            `json:"status"`
		Replica  string            `json:"replica"`
		Settings map[string]string `json:"settings,omitempty"`
	}{"ok", h.Replica, h.Settings})
}

func (h *handlers) readyz(w http.ResponseWriter, r *http.Request) {
	if err := h.Ready(r.Context()); err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready", "replica": h.Replica})
}

func (h *handlers) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, code := statusOf(err)
	h.Log.Warn("request failed", "path", r.URL.Path, "status", status, "err", err,
		"request_id", middleware.GetReqID(r.Context()))
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, errorBody{Error: err.Error(), Code: code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone; nothing to do then
}
