package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/builder"
	"github.com/locklab/locklab/internal/dbtest"
	"github.com/locklab/locklab/internal/etcdtest"
	"github.com/locklab/locklab/internal/history"
	etcdlock "github.com/locklab/locklab/internal/locks/etcd"
	"github.com/locklab/locklab/internal/locks/fence"
	lua "github.com/locklab/locklab/internal/locks/v6_lua"
	zklock "github.com/locklab/locklab/internal/locks/zk"
	"github.com/locklab/locklab/internal/origin"
	"github.com/locklab/locklab/internal/redisconn"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/internal/sale"
	"github.com/locklab/locklab/internal/server"
	"github.com/locklab/locklab/internal/step"
	"github.com/locklab/locklab/internal/versions"
	"github.com/locklab/locklab/internal/zktest"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// stack is one replica over real Redis: a stock node that is also redlock's
// first node, and two more redlock nodes.
type stack struct {
	nodes [3]*redistest.Server
	rdb   *redis.Client
	url   string
	h     http.Handler
}

type options struct {
	lock, token    string
	override       bool
	overrideAdmin  bool // the replica is reached beyond loopback
	chaos          bool
	acquireTimeout time.Duration
	maxInFlight    int
	maxOthers      int
	ready          func(ctx context.Context) error           // default: a PING
	noEtcd         bool                                      // -lock etcd with no etcd cluster configured
	etcd           func(*etcdtest.Cluster, *clientv3.Client) // -lock etcd: called with its cluster and client before they are used
	base           context.Context                           // every request's context (default: background)
	steps          *step.Gate                                // the step gate, its hook in the stock's client
	lessonLease    time.Duration                             // the stepped sales' lease (Config.LessonLease), and GET /store
}

func newStack(t testing.TB, o options) *stack {
	t.Helper()
	s := &stack{nodes: [3]*redistest.Server{redistest.Start(t), redistest.Start(t), redistest.Start(t)}}
	s.rdb = s.nodes[0].Client()
	clients := []redis.UniversalClient{s.nodes[0].Client(), s.nodes[1].Client(), s.nodes[2].Client()}
	log := slog.New(slog.DiscardHandler)
	// As the service builds them: fenced and unfenced when the fault hooks
	// (whose fence=1|0 chooses per sale) are on.
	variants := []versions.Variant{{Wait: "poll"}}
	if o.chaos {
		variants = append(variants, versions.Variant{Wait: "poll", Fence: true})
	}
	if o.lessonLease > 0 { // as the service builds them for the lessons
		variants = append(variants, versions.Variant{Wait: "poll", Lease: o.lessonLease}, versions.Variant{Wait: "poll", Fence: true, Lease: o.lessonLease})
	}
	stock, locks := s.nodes[0].Client(), s.nodes[0].Client()
	var names []string
	if o.steps != nil { // one client for both, as the service has, with the gate
		locks = stock
		stock.AddHook(step.Hook{})
		for i, c := range clients { // and each Redlock node's, named
			names = append(names, redisconn.NodeName(s.nodes[i].Addr))
			c.AddHook(step.Hook{Node: names[i]})
		}
	}
	deps := builder.Deps{Redis: locks, Redlock: clients, RedlockNames: names,
		LockKey: api.DefaultLockKey, Retry: time.Millisecond, RedlockRetry: time.Millisecond}
	if o.lock == "etcd" && !o.noEtcd { // one real member: the etcd row's cluster tests are the guard's
		c := etcdtest.Start(t, 1)
		deps.Etcd = c.Client()
		if o.etcd != nil {
			o.etcd(c, deps.Etcd)
		}
	}
	if versions.NeedsDB(o.lock) { // a real MariaDB: the guard's own tests are its failures'
		s := dbtest.Start(t)
		deps.DB, deps.DBHolds = s.DB(), s.Holds()
	}
	if versions.NeedsZK(o.lock) { // one real ZooKeeper: the guard's own tests are the ensemble's
		zs, err := zklock.Dial(zktest.Start(t, 1).Servers(), zklock.SessionOptions{Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(zs.Close)
		deps.ZK = zs
	}
	all := builder.BuildAll(deps, variants)
	if o.lock == "" {
		o.lock = "v6"
	}
	if o.acquireTimeout == 0 {
		o.acquireTimeout = 5 * time.Second
	}
	if o.ready == nil {
		o.ready = func(ctx context.Context) error { return s.rdb.Ping(ctx).Err() }
	}
	svc := sale.New(stock, sale.Options{Key: api.DefaultStockKey, AcquireTimeout: o.acquireTimeout})
	h := server.New(server.Config{Seller: svc, Versions: all, Default: variants[0], Names: versions.Names(), Lock: o.lock, LockKey: api.DefaultLockKey,
		Override: o.override, OverrideAdmin: o.overrideAdmin, Replica: "test-1", Hosts: origin.NewHosts("test-1"), AdminToken: o.token, Chaos: o.chaos, Log: log,
		Settings: map[string]string{"lock": o.lock, "work": "1ms"},
		Ready:    o.ready, History: history.NewRing(100),
		MaxInFlight: o.maxInFlight, MaxOthersInFlight: o.maxOthers, Steps: o.steps, LessonLease: o.lessonLease,
		Store: func(ctx context.Context) (api.Store, error) {
			return server.ReadStore(ctx, stock, server.StoreKeys{Stock: api.DefaultStockKey, Lock: api.DefaultLockKey, Counter: fence.CounterKey(api.DefaultLockKey)})
		},
		Forget: func(ctx context.Context, owner string) (string, error) {
			return server.ForgetLock(ctx, stock, api.DefaultLockKey, owner)
		},
		Queues: builder.NewQueues(deps)})
	s.h = h
	ts := httptest.NewUnstartedServer(h)
	if o.base != nil {
		ts.Config.BaseContext = func(net.Listener) context.Context { return o.base }
	}
	ts.Start()
	t.Cleanup(ts.Close)
	s.url = ts.URL
	return s
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
}

func (s *stack) do(t *testing.T, method, path, body string, header ...string) reply {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	r := reply{status: res.StatusCode, header: res.Header}
	if err := json.Unmarshal(raw, &r.body); err != nil {
		t.Fatalf("%s %s: body %q is not a JSON object: %v", method, path, raw, err)
	}
	return r
}

func (s *stack) expect(t *testing.T, r reply, status int, fields map[string]any) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d (body %v), want %d", r.status, r.body, status)
	}
	for k, want := range fields {
		if got := r.body[k]; got != want {
			t.Fatalf("%s = %v (body %v), want %v", k, got, r.body, want)
		}
	}
}

func (s *stack) stock(t *testing.T) string {
	t.Helper()
	return s.rdb.Get(context.Background(), api.DefaultStockKey).Val()
}

// Every version sells one unit per request and answers 409 once the stock is gone.
func TestEveryVersionSellsThenSoldOut(t *testing.T) {
	for _, name := range versions.Names() {
		t.Run(name, func(t *testing.T) {
			s := newStack(t, options{lock: name})
			s.expect(t, s.do(t, "PUT", "/stock", `{"stock":2}`), 200, map[string]any{"stock": 2.0})
			s.expect(t, s.do(t, "POST", "/sale", ""), 200, map[string]any{"sold": true, "remaining": 1.0, "lock": name, "replica": "test-1"})
			s.expect(t, s.do(t, "POST", "/sale", ""), 200, map[string]any{"sold": true, "remaining": 0.0})
			s.expect(t, s.do(t, "POST", "/sale", ""), 409, map[string]any{"sold": false, "remaining": 0.0, "code": "sold_out"})
			s.expect(t, s.do(t, "GET", "/stock", ""), 200, map[string]any{"key": api.DefaultStockKey, "stock": 0.0})
		})
	}
}

func TestLockOverride(t *testing.T) {
	off := newStack(t, options{})
	off.rdb.Set(context.Background(), api.DefaultStockKey, 5, 0)
	off.expect(t, off.do(t, "POST", "/sale?lock=v7", ""), 400, map[string]any{"code": "override_disabled"})

	on := newStack(t, options{override: true})
	on.rdb.Set(context.Background(), api.DefaultStockKey, 5, 0)
	on.expect(t, on.do(t, "POST", "/sale?lock=v7", ""), 200, map[string]any{"lock": "v7", "sold": true})
	r := on.do(t, "POST", "/sale?lock=v9", "")
	on.expect(t, r, 400, map[string]any{"code": "unknown_lock"})
	if !strings.Contains(r.body["error"].(string), strings.Join(versions.Names(), " ")) {
		t.Fatalf("error %q does not list the versions", r.body["error"])
	}
	if on.stock(t) != "4" {
		t.Fatalf("stock %s, want 4: only one request sold", on.stock(t))
	}
}

// Reached beyond loopback, choosing the version per request is the admin's:
// ?lock=none would let any client oversell.
func TestLockOverrideNeedsTheTokenBeyondLoopback(t *testing.T) {
	s := newStack(t, options{override: true, overrideAdmin: true, token: "t"})
	s.rdb.Set(context.Background(), api.DefaultStockKey, 5, 0)
	for _, q := range []string{"lock=none", "wait=notify", "lock=v7&wait=handoff"} {
		r := s.do(t, "POST", "/sale?"+q, "")
		s.expect(t, r, 401, map[string]any{"code": api.CodeUnauthorized})
		s.expect(t, s.do(t, "POST", "/sale?"+q, "", "Authorization", "Bearer wrong"), 401, map[string]any{"code": api.CodeUnauthorized})
	}
	if s.stock(t) != "5" {
		t.Fatalf("stock %s after refused requests, want 5", s.stock(t))
	}
	s.expect(t, s.do(t, "POST", "/sale", ""), 200, map[string]any{"sold": true}) // the default version: anyone's
	s.expect(t, s.do(t, "POST", "/sale?lock=v7", "", "Authorization", "Bearer t"), 200, map[string]any{"lock": "v7", "sold": true})
}

func TestSetStockValidation(t *testing.T) {
	s := newStack(t, options{})
	s.rdb.Set(context.Background(), api.DefaultStockKey, 7, 0)
	for _, body := range []string{`{"stock":-1}`, `{"stock":1.5}`, `{"stock":"5"}`, `{}`, `{"stock":5,"x":1}`, `not json`, `{"stock":5} {}`} {
		s.expect(t, s.do(t, "PUT", "/stock", body), 400, map[string]any{"code": "bad_request"})
	}
	if s.stock(t) != "7" {
		t.Fatalf("stock %s after bad requests, want 7", s.stock(t))
	}
}

func TestAdminToken(t *testing.T) {
	s := newStack(t, options{token: "s3cret"})
	r := s.do(t, "PUT", "/stock", `{"stock":3}`)
	s.expect(t, r, 401, map[string]any{"code": "unauthorized"})
	if r.header.Get("WWW-Authenticate") == "" {
		t.Fatal("401 without WWW-Authenticate")
	}
	s.expect(t, s.do(t, "PUT", "/stock", `{"stock":3}`, "Authorization", "Bearer wrong"), 401, nil)
	s.expect(t, s.do(t, "PUT", "/stock", `{"stock":3}`, "Authorization", "Bearer s3cret"), 200, map[string]any{"stock": 3.0})
	s.expect(t, s.do(t, "GET", "/stock", ""), 200, map[string]any{"stock": 3.0}) // reads stay open
}

func TestLockTimeout503(t *testing.T) {
	s := newStack(t, options{lock: "v6", acquireTimeout: 30 * time.Millisecond})
	s.rdb.Set(context.Background(), api.DefaultStockKey, 5, 0)
	held, err := lua.New(s.rdb, lua.Options{Key: api.DefaultLockKey}).TryAcquire(context.Background(), "another replica")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	r := s.do(t, "POST", "/sale", "")
	s.expect(t, r, 503, map[string]any{"sold": false, "code": "lock_timeout"})
	if r.header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	if s.stock(t) != "5" {
		t.Fatalf("stock %s, want 5", s.stock(t))
	}
}

// Stock node down: every sale is a 503 (no lock falls through to a sale),
// readiness fails, liveness does not.
func TestStockNodeDown(t *testing.T) {
	for _, name := range versions.Names() {
		t.Run(name, func(t *testing.T) {
			s := newStack(t, options{lock: name})
			s.nodes[0].Stop()
			s.expect(t, s.do(t, "POST", "/sale", ""), 503, map[string]any{"sold": false, "code": "unavailable"})
		})
	}
	s := newStack(t, options{})
	s.nodes[0].Stop()
	s.expect(t, s.do(t, "GET", "/readyz", ""), 503, nil)
	s.expect(t, s.do(t, "GET", "/stock", ""), 503, nil)
	s.expect(t, s.do(t, "GET", "/healthz", ""), 200, map[string]any{"status": "ok"})
}

// Redlock with two of three nodes down while the stock node is up: a 503 at
// once, and the stock is untouched (the tutorial's code sold anyway).
func TestRedlockQuorumLost(t *testing.T) {
	s := newStack(t, options{lock: "redlock"})
	s.rdb.Set(context.Background(), api.DefaultStockKey, 5, 0)
	s.nodes[1].Stop()
	s.expect(t, s.do(t, "POST", "/sale", ""), 200, map[string]any{"sold": true, "remaining": 4.0})
	s.nodes[2].Stop()
	r := s.do(t, "POST", "/sale", "")
	s.expect(t, r, 503, map[string]any{"sold": false, "code": "unavailable"})
	if !strings.Contains(r.body["error"].(string), "quorum") {
		t.Fatalf("error %q does not say the quorum is lost", r.body["error"])
	}
	if s.stock(t) != "4" {
		t.Fatalf("stock %s, want 4", s.stock(t))
	}
}

// The etcd version on a replica with no etcd cluster: a clean 503, nothing
// sold, the stock untouched.
func TestEtcdNotConfigured(t *testing.T) {
	s := newStack(t, options{lock: "etcd", noEtcd: true})
	s.rdb.Set(context.Background(), api.DefaultStockKey, 5, 0)
	r := s.do(t, "POST", "/sale", "")
	s.expect(t, r, 503, map[string]any{"sold": false, "code": "unavailable"})
	if !strings.Contains(r.body["error"].(string), "-etcd") || s.stock(t) != "5" {
		t.Fatalf("error %q, stock %s: want the -etcd flag named and the stock at 5", r.body["error"], s.stock(t))
	}
}

// A fenced etcd sale whose replica is cut off from etcd right after the lock
// (its member frozen just before the token's read) is answered promptly:
// 503 unavailable, nothing sold, the stock untouched. It holds no
// -max-in-flight slot after: the next sale, etcd still cut off, is refused
// by etcd within the same bound, not busy.
func TestEtcdCutBeforeTheToken(t *testing.T) {
	prefix := api.DefaultLockKey + "/"
	s := newStack(t, options{lock: "etcd", chaos: true, token: "t", maxInFlight: 1, acquireTimeout: 30 * time.Second,
		etcd: func(c *etcdtest.Cluster, cli *clientv3.Client) {
			etcdtest.BeforeGet(cli, func(key string) bool { return strings.HasPrefix(key, prefix) && key != prefix }, func() { c.Freeze(true) })
		}})
	s.rdb.Set(context.Background(), api.DefaultStockKey, 5, 0)
	bound := etcdlock.RequestTimeout + 4*time.Second // one request, then a revocation, on a busy machine
	for _, path := range []string{"/sale?fence=1", "/sale"} {
		replied := make(chan reply, 1)
		go func() { replied <- s.do(t, "POST", path, "", "Authorization", "Bearer t") }()
		select {
		case r := <-replied:
			s.expect(t, r, 503, map[string]any{"sold": false, "code": "unavailable"})
		case <-time.After(bound):
			t.Fatalf("POST %s cut off from etcd: no reply after %s", path, bound)
		}
	}
	if s.stock(t) != "5" {
		t.Fatalf("stock %s, want 5", s.stock(t))
	}
}

func TestStockMissingIsNotSoldOut(t *testing.T) {
	s := newStack(t, options{})
	s.expect(t, s.do(t, "POST", "/sale", ""), 503, map[string]any{"code": "stock_missing"})
	s.expect(t, s.do(t, "GET", "/stock", ""), 503, map[string]any{"code": "stock_missing"})
	s.rdb.Set(context.Background(), api.DefaultStockKey, "lots", 0)
	s.expect(t, s.do(t, "POST", "/sale", ""), 500, map[string]any{"code": "stock_corrupt"})
}

func TestUnknownRoutes(t *testing.T) {
	s := newStack(t, options{})
	s.expect(t, s.do(t, "DELETE", "/stock", ""), 405, map[string]any{"code": "method_not_allowed"})
	s.expect(t, s.do(t, "GET", "/nope", ""), 404, map[string]any{"code": "not_found"})
	s.expect(t, s.do(t, "GET", "/readyz", ""), 200, map[string]any{"status": "ready"})
	// Liveness also shows the keys and the lock settings, which the tools
	// read instead of hard-coding them, and the load test's report quotes.
	r := s.do(t, "GET", "/healthz", "")
	s.expect(t, r, 200, map[string]any{"status": "ok", "replica": "test-1", "stock_key": api.DefaultStockKey, "lock_key": api.DefaultLockKey})
	if got, _ := r.body["settings"].(map[string]any); got["lock"] != "v6" || got["work"] != "1ms" {
		t.Fatalf("/healthz settings = %v, want lock v6, work 1ms", r.body["settings"])
	}
}

// Another site cannot sell or set the stock through a visitor's browser: the
// sale is POST only (an image tag's GET sells nothing), a change from another
// site is 403, a rebound Host 421 on every route, even with ?lock=none on
// loopback; curl's requests, with neither header, still sell.
func TestOtherSitesChangeNothing(t *testing.T) {
	s := newStack(t, options{override: true})
	s.rdb.Set(context.Background(), api.DefaultStockKey, 100, 0)
	send := func(method, path, host string, header ...string) int {
		t.Helper()
		req, err := http.NewRequest(method, s.url+path, strings.NewReader(`{"stock":5}`))
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body api.Error
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil || (res.StatusCode >= 400 && body.Code == "") {
			t.Errorf("%s %s (Host %q): %d without a JSON error: %v", method, path, host, res.StatusCode, err)
		}
		return res.StatusCode
	}
	for _, c := range []struct {
		name, method, path, host string
		header                   []string
		want                     int
	}{
		{"an image tag", "GET", "/sale", "", nil, 405},
		{"an image tag, no lock", "GET", "/sale?lock=none", "", []string{"Sec-Fetch-Site", "cross-site"}, 405},
		{"a no-cors fetch", "POST", "/sale?lock=none", "", []string{"Sec-Fetch-Site", "cross-site", "Origin", "http://127.0.0.2:9000"}, 403},
		{"a form", "POST", "/sale", "", []string{"Sec-Fetch-Site", "cross-site", "Origin", "null"}, 403},
		{"another port of this site", "POST", "/sale", "", []string{"Sec-Fetch-Site", "same-site", "Origin", "http://localhost:8000"}, 403},
		{"an old browser", "PUT", "/stock", "", []string{"Origin", "http://evil.example"}, 403},
		{"a rebound name", "PUT", "/stock", "rebind.example", nil, 421},
		{"a rebound name, a sale", "POST", "/sale?lock=none", "rebind.example:8080", nil, 421},
		{"a rebound name, reading", "GET", "/stock", "rebind.example", nil, 421},
	} {
		if got := send(c.method, c.path, c.host, c.header...); got != c.want {
			t.Errorf("%s: %s %s: %d, want %d", c.name, c.method, c.path, got, c.want)
		}
	}
	if got := s.stock(t); got != "100" {
		t.Fatalf("stock %s after other sites' requests, want 100 (unchanged)", got)
	}
	if got := send("POST", "/sale", "", "Origin", s.url, "Sec-Fetch-Site", "same-origin"); got != 200 {
		t.Errorf("the stack's own page: %d, want 200", got)
	}
	if got := send("POST", "/sale", "test-1"); got != 200 { // the replica's own name; curl: no Origin, no Sec-Fetch-*
		t.Errorf("curl to the replica's name: %d, want 200", got)
	}
	if got := s.stock(t); got != "98" {
		t.Fatalf("stock %s after two sales, want 98", got)
	}
}

// Fault hooks answer only to -chaos and the admin token, and are validated.
func TestFaultHooksAreGuarded(t *testing.T) {
	off := newStack(t, options{token: "t"})
	off.rdb.Set(context.Background(), api.DefaultStockKey, 5, 0)
	off.expect(t, off.do(t, "POST", "/sale?hold=1s", "", "Authorization", "Bearer t"), 400, map[string]any{"code": "chaos_disabled"})

	on := newStack(t, options{token: "t", chaos: true, override: true, lock: "v6", acquireTimeout: 100 * time.Millisecond})
	on.rdb.Set(context.Background(), api.DefaultStockKey, 5, 0)
	on.expect(t, on.do(t, "POST", "/sale?hold=1ms", ""), 401, map[string]any{"code": "unauthorized"})
	on.expect(t, on.do(t, "POST", "/sale?hold=1ms", "", "Authorization", "Bearer wrong"), 401, nil)
	for _, q := range []string{"hold=soon", "hold=-1s", "hold=1h", "release_pause=0s", "nested=maybe", "fence=maybe", "lock=v1&fence=1", "lock=db-seed&fence=1",
		"lease=0s", "lease=1h", "lease=5s", // v6 takes no lease per request
		"off=", "off=fencing", "off=fence,", "off=lock,nothing"} { // make mutations' switches: known names only
		on.expect(t, on.do(t, "POST", "/sale?"+q, "", "Authorization", "Bearer t"), 400, map[string]any{"code": "bad_request"})
	}
	if on.stock(t) != "5" {
		t.Fatalf("stock %s after refused hooks, want 5", on.stock(t))
	}
	on.expect(t, on.do(t, "POST", "/sale?hold=5ms&release_pause=5ms", "", "Authorization", "Bearer t"), 200, map[string]any{"sold": true, "remaining": 4.0})
	// fence=1 picks the fenced lock: its write is the fenced script, which
	// records the token beside the stock.
	on.expect(t, on.do(t, "POST", "/sale?fence=1", "", "Authorization", "Bearer t"), 200, map[string]any{"sold": true, "remaining": 3.0})
	if tok := on.rdb.HGet(context.Background(), api.DefaultStockKey+":fence:redis", "token").Val(); tok == "" {
		t.Fatal("fence=1 sold without a fencing token reaching the stock")
	}
	off.expect(t, off.do(t, "POST", "/sale?off=lock", "", "Authorization", "Bearer t"), 400, map[string]any{"code": "chaos_disabled"})
	// off=lock: the lock grants whoever asks, a sale sells while another
	// holds it (with the lock on, a 100 ms deadline's 503).
	on.rdb.Set(context.Background(), api.DefaultLockKey, "someone else", time.Minute)
	on.expect(t, on.do(t, "POST", "/sale", ""), 503, map[string]any{"code": "lock_timeout"})
	on.expect(t, on.do(t, "POST", "/sale?off=lock,fence", "", "Authorization", "Bearer t"), 200, map[string]any{"sold": true, "remaining": 2.0})
}

// The reentry scenario through the API: v6 asked to nest waits on itself
// until its deadline (503) and sells nothing; v7 nests by design.
func TestNestedHookShowsReentry(t *testing.T) {
	s := newStack(t, options{token: "t", chaos: true, override: true, acquireTimeout: 100 * time.Millisecond})
	s.rdb.Set(context.Background(), api.DefaultStockKey, 5, 0)
	s.expect(t, s.do(t, "POST", "/sale?lock=v6&nested=1", "", "Authorization", "Bearer t"), 503, map[string]any{"code": "lock_timeout"})
	s.expect(t, s.do(t, "POST", "/sale?lock=v7&nested=1", "", "Authorization", "Bearer t"), 200, map[string]any{"sold": true, "remaining": 4.0})
	if s.rdb.Exists(context.Background(), api.DefaultLockKey).Val() != 0 {
		t.Fatal("a lock was left behind")
	}
}

// Every sale is recorded and served by GET /history (admin), since a time.
func TestHistory(t *testing.T) {
	s := newStack(t, options{token: "t", lock: "v6"})
	s.rdb.Set(context.Background(), api.DefaultStockKey, 1, 0)
	before := time.Now()
	s.expect(t, s.do(t, "POST", "/sale", "", "X-Request-Id", "run-1"), 200, nil)
	s.expect(t, s.do(t, "POST", "/sale", "", "X-Request-Id", "run-2"), 409, nil)
	s.expect(t, s.do(t, "GET", "/history", ""), 401, nil)
	r := s.do(t, "GET", "/history?since="+before.Format(time.RFC3339Nano), "", "Authorization", "Bearer t")
	s.expect(t, r, 200, map[string]any{"replica": "test-1", "truncated": false})
	sales := r.body["sales"].([]any)
	if len(sales) != 2 {
		t.Fatalf("%d sales, want 2: %v", len(sales), r.body)
	}
	sold, out := sales[0].(map[string]any), sales[1].(map[string]any)
	if sold["id"] != "run-1" || sold["lock"] != "v6" || sold["owner"] == nil || sold["obtained"] == nil ||
		sold["read"].(map[string]any)["value"] != 1.0 || sold["written"].(map[string]any)["value"] != 0.0 || sold["status"] != 200.0 {
		t.Fatalf("the sale's record: %v", sold)
	}
	if out["code"] != "sold_out" || out["written"] != nil || out["status"] != 409.0 {
		t.Fatalf("the sold-out request's record: %v", out)
	}
	r = s.do(t, "GET", "/history?since="+time.Now().Add(time.Hour).Format(time.RFC3339Nano), "", "Authorization", "Bearer t")
	if got := r.body["sales"].([]any); len(got) != 0 {
		t.Fatalf("since an hour ahead: %d sales", len(got))
	}
	s.expect(t, s.do(t, "GET", "/history?since=yesterday", "", "Authorization", "Bearer t"), 400, map[string]any{"code": "bad_request"})

	// Followed live: what came after a record number, a page at a time.
	s.expect(t, s.do(t, "GET", "/history?after=0&limit=1", "", "Authorization", "Bearer t"), 200, map[string]any{"last": 2.0})
	r = s.do(t, "GET", "/history?after=1", "", "Authorization", "Bearer t")
	if got := r.body["sales"].([]any); len(got) != 1 || got[0].(map[string]any)["id"] != "run-2" || got[0].(map[string]any)["seq"] != 2.0 {
		t.Fatalf("after 1: %v; want run-2 (seq 2)", got)
	}
	for _, q := range []string{"after=-1", "after=x", "after=0&limit=0", "after=0&limit=5001"} {
		s.expect(t, s.do(t, "GET", "/history?"+q, "", "Authorization", "Bearer t"), 400, map[string]any{"code": "bad_request"})
	}
}
