// Package server is the inventory service's HTTP API. Every reply is JSON, so a
// load test can classify each one, and every error maps to a status in one
// table (statusOf).
package server

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
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
	Store    func(ctx context.Context) (api.Store, error)
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

// remember records the sale in the history, if kept.
func (h *handlers) remember(r *http.Request, m sale.Method, start time.Time, tr sale.Trace, code string) {
	if h.History == nil {
		return
	}
	status := http.StatusOK
	if code != "" {
		status = api.Status(code)
	}
	h.History.Add(history.Sale{ID: middleware.GetReqID(r.Context()), Replica: h.Replica, Lock: m.Name, Wait: m.Wait,
		Start: start, End: time.Now(), Status: status, Code: code, Trace: tr})
}

// history serves the sales recorded since ?since= (RFC 3339, nanoseconds
// allowed; default: all kept) or, with ?after=SEQ, the next at most
// ?limit= (default and most: maxHistoryPage) kept after the one numbered SEQ:
// how the lab follows a run live without reading it all again.
func (h *handlers) history(w http.ResponseWriter, r *http.Request) {
	if h.History == nil {
		writeError(w, api.CodeNotFound, "no history is kept: start the service with -history N (N > 0)")
		return
	}
	q := r.URL.Query()
	var sales []history.Sale
	var truncated bool
	last := h.History.Last()
	if q.Has("after") {
		after, err := strconv.ParseUint(q.Get("after"), 10, 64)
		limit := maxHistoryPage
		if err == nil && q.Has("limit") {
			limit, err = strconv.Atoi(q.Get("limit"))
			if err == nil && (limit < 1 || limit > maxHistoryPage) {
				err = fmt.Errorf("want 1-%d", maxHistoryPage)
			}
		}
		if err != nil {
			writeError(w, api.CodeBadRequest, fmt.Sprintf("after=%q limit=%q: want a record number >= 0 and a page of 1-%d", q.Get("after"), q.Get("limit"), maxHistoryPage))
			return
		}
		sales, truncated, last = h.History.After(after, limit)
	} else {
		var since time.Time
		if v := q.Get("since"); v != "" {
			var err error
			if since, err = time.Parse(time.RFC3339Nano, v); err != nil {
				writeError(w, api.CodeBadRequest, fmt.Sprintf("since=%q: want an RFC 3339 time", v))
				return
			}
		}
		sales, truncated = h.History.Since(since)
	}
	// Streamed, one sale at a time: the whole reply built in memory first
	// raised the replicas' peak memory by megabytes per thousand sales.
	replica, _ := json.Marshal(h.Replica)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `{"replica":%s,"truncated":%t,"last":%d,"sales":[`, replica, truncated, last) // history.Reply's shape
	for i, s := range sales {
		if i > 0 {
			bw.WriteByte(',')
		}
		raw, _ := json.Marshal(s) // plain data: it cannot fail
		bw.Write(raw)
	}
	bw.WriteString("]}\n")
	_ = bw.Flush() // the client may be gone; nothing to do then
}

// maxHistoryPage bounds one ?after= reply.
const maxHistoryPage = 5000

func (h *handlers) record(m sale.Method, outcome string) {
	if h.Recorder != nil {
		h.Recorder.Sale(m, outcome)
	}
}

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
	// A stepped sale (the lab's lessons) may ask for fencing and a nested
	// acquisition without -chaos: the lessons' fix and v6's story, shown
	// on make up's replicas, and stepping is already the admin's beyond
	// loopback (startStepped).
	if q.Has("step") && h.LessonLease > 0 && !slices.ContainsFunc(hooks, func(p hook) bool { return p.name != "fence" && p.name != "nested" && q.Has(p.name) }) {
		for _, p := range hooks {
			if (p.name == "fence" || p.name == "nested") && q.Has(p.name) && !p.set(q.Get(p.name)) {
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

// requestError is a request refused before any work: its code and message.
type requestError struct {
	code, msg string
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

// codes maps each error of the sale to its code (api.Status gives the HTTP
// status); any other error is Redis or the network failing: unavailable.
var codes = []struct {
	err  error
	code string
}{
	{sale.ErrSoldOut, api.CodeSoldOut},
	{sale.ErrLockTimeout, api.CodeLockTimeout},
	{sale.ErrStockMissing, api.CodeStockMissing},
	{sale.ErrFenced, api.CodeFenced},
	// Not fenced: the stock refused nothing. The lock failed to give what
	// the sale needs, nothing was sold, and a retry may get a token.
	{sale.ErrNoToken, api.CodeUnavailable},
	{sale.ErrLeaseLost, api.CodeLeaseLost},
	{sale.ErrStockCorrupt, api.CodeStockCorrupt},
	{sale.ErrIndeterminate, api.CodeIndeterminate},
	{ErrShuttingDown, api.CodeShuttingDown},
	{step.ErrCancelled, api.CodeClientGone}, // the lab reset it, or left it
	{context.Canceled, api.CodeClientGone},
}

// codeOf names an error of the sale by its code.
func codeOf(err error) string {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return api.CodeUnavailable
}

func (h *handlers) stock(w http.ResponseWriter, r *http.Request) {
	n, err := h.Seller.Stock(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Stock{Key: h.Seller.Key(), Stock: n})
}

func (h *handlers) setStock(w http.ResponseWriter, r *http.Request) {
	n, err := parseSetStock(http.MaxBytesReader(w, r.Body, 1<<10))
	if err != nil {
		writeError(w, api.CodeBadRequest, `want {"stock": N} with N a whole number >= 0: `+err.Error())
		return
	}
	if err := h.Seller.SetStock(r.Context(), n); err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Stock{Key: h.Seller.Key(), Stock: n})
}

// parseSetStock reads PUT /stock's body, api.SetStock, strictly: one JSON
// object whose only key is exactly "stock" (encoding/json would also take
// "STOCK"), an integer literal (not 1e3, not 5.0), nothing after it.
func parseSetStock(body io.Reader) (int64, error) {
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(body)
	if err := dec.Decode(&fields); err != nil {
		return 0, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return 0, errors.New("trailing data after the JSON object")
	}
	raw, ok := fields["stock"]
	switch {
	case !ok:
		return 0, errors.New(`"stock" is missing`)
	case len(fields) != 1:
		return 0, errors.New(`unknown fields: want only "stock"`)
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	switch {
	case err != nil:
		return 0, fmt.Errorf("stock %s: not a whole number", raw)
	case n < 0:
		return 0, fmt.Errorf("stock must be >= 0, got %d", n)
	}
	return n, nil
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

func (h *handlers) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := codeOf(err)
	h.Log.Warn("request failed", "path", r.URL.Path, "code", code, "err", err,
		"request_id", middleware.GetReqID(r.Context()))
	writeError(w, code, err.Error())
}

func writeError(w http.ResponseWriter, code, msg string) {
	writeJSON(w, api.Status(code), api.Error{Error: msg, Code: code})
}

// writeJSON writes v with status; a 503 also says when to retry.
func writeJSON(w http.ResponseWriter, status int, v any) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone; nothing to do then
}
