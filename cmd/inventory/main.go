// Command inventory is the locklab service: it sells one unit of stock per
// POST /sale, guarded by the lock version chosen with -lock.
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // served only with -pprof, on its own listener
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/builder"
	"github.com/locklab/locklab/internal/cli"
	"github.com/locklab/locklab/internal/history"
	dblock "github.com/locklab/locklab/internal/locks/db"
	"github.com/locklab/locklab/internal/locks/etcd"
	"github.com/locklab/locklab/internal/locks/fence"
	"github.com/locklab/locklab/internal/locks/retry"
	"github.com/locklab/locklab/internal/locks/zk"
	"github.com/locklab/locklab/internal/metrics"
	"github.com/locklab/locklab/internal/origin"
	"github.com/locklab/locklab/internal/redisconn"
	"github.com/locklab/locklab/internal/sale"
	"github.com/locklab/locklab/internal/server"
	"github.com/locklab/locklab/internal/step"
	"github.com/locklab/locklab/internal/versions"
	"github.com/redis/go-redis/v9"
)

// The memory limit is the process's, set here, not in run, which the tests
// call in their own process.
func main() {
	setMemoryLimit(os.Getenv)
	cli.Main(run)
}

// run is the whole program; it returns the exit status: 0 after a clean stop,
// 1 when the service fails, 2 for bad flags.
func run(ctx context.Context, args []string, getenv func(string) string, _, stderr io.Writer) int {
	cfg, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return cli.Status(err)
	}
	if cfg.Probe != "" && cfg.ProbeStay {
		return gate(ctx, cfg.Probe, stderr)
	}
	if cfg.Probe != "" {
		return cli.Probe(ctx, cfg.Probe, stderr)
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel})).With("replica", cfg.Name)
	redis.SetLogger(redisLogger{log})
	log.Info("runtime memory limit", "bytes", debug.SetMemoryLimit(-1), "gomemlimit", getenv("GOMEMLIMIT"))

	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Bind, strconv.Itoa(cfg.Port)))
	if err != nil {
		log.Error("cannot listen", "bind", cfg.Bind, "port", cfg.Port, "err", err)
		return 1
	}
	if cfg.AdminToken == "" {
		log.Warn("no -admin-token: ?lock=, PUT /stock, GET /history open to every client of this listener", "addr", ln.Addr().String(),
			"reached_from", cfg.reach(), "loopback_only", cfg.loopback())
	}
	if cfg.Pprof != "" {
		pln, err := net.Listen("tcp", cfg.Pprof)
		if err != nil {
			log.Error("cannot listen for the profiler", "addr", cfg.Pprof, "err", err)
			return 1
		}
		defer pln.Close()
		// net/http/pprof registers on http.DefaultServeMux, which the
		// service's own routes never use: the profiler is only here.
		go func() { _ = http.Serve(pln, http.DefaultServeMux) }()
		log.Info("profiler", "addr", pln.Addr().String())
	}
	if err := serve(ctx, cfg, ln, log); err != nil {
		log.Error("stopped with an error", "err", err)
		return 1
	}
	return 0
}

// newRedis is the client of the stock's node: -redis, or (-sentinel) the
// primary the sentinels name, followed through a failover.
func (c config) newRedis() *redis.Client {
	if len(c.Sentinel) > 0 {
		return redisconn.NewFailover(c.SentinelMaster, c.Sentinel, c.RedisPassword)
	}
	return redisconn.New(c.Redis, c.RedisPassword)
}

// serve builds the dependencies, serves on ln until ctx ends, then stops
// cleanly: no new connections, in-flight sales finish and release their locks,
// Redis connections close.
func serve(ctx context.Context, cfg config, ln net.Listener, log *slog.Logger) error {
	mx := metrics.New()
	rdb := cfg.newRedis()
	defer rdb.Close()
	// The step gate is in every Redis client: a sale the lab steps stops
	// before each command; any other pays one context lookup.
	rdb.AddHook(mx.RoundTrips(cfg.redis()))
	rdb.AddHook(step.Hook{})
	nodes := redisconn.NewAll(cfg.Redlock, cfg.RedisPassword)
	defer redisconn.CloseAll(nodes)
	for i, n := range nodes {
		n.AddHook(mx.RoundTrips(cfg.Redlock[i]))
		n.AddHook(step.Hook{})
	}
	// The etcd client dials in the background: a replica whose etcd is down
	// still serves every other version.
	ecli, err := etcd.Dial(cfg.Etcd)
	if err != nil {
		return err
	}
	defer ecli.Close()
	dbc, holds, err := openDB(cfg.DB, log)
	if err != nil {
		return err
	}
	if dbc != nil {
		defer dbc.Close()
		defer holds.Close()
	}
	zks, err := dialZK(cfg.ZK, cfg.TTL, log)
	if err != nil {
		return err
	}
	if zks != nil {
		defer zks.Close()
	}
	// Closed before the clients above (deferred after them): a stopping
	// replica cancels its stepped sales, which release their locks.
	steps := step.New(step.Options{Wait: server.LessonLease / 2, Log: log.With("part", "step")})
	defer steps.Close()
	deps := builder.Deps{Redis: rdb, Sentinels: cfg.Sentinel, SentinelMaster: cfg.SentinelMaster, Redlock: nodes, Etcd: ecli, DB: dbc, DBHolds: holds, ZK: zks, LockKey: cfg.LockKey, TTL: cfg.TTL, Retry: cfg.Retry, Claim: cfg.Claim, ReplicaAck: cfg.ReplicaAck,
		RedlockRetry: cfg.RedlockRetry, Log: log, Observer: mx}
	if slices.ContainsFunc(cfg.variants(), func(v versions.Variant) bool { return versions.Queued(v.Wait) }) {
		n := retry.NewNotifier(ctx, rdb, cfg.LockKey, min(cfg.TTL, retry.Backstop), cfg.Claim, log)
		defer n.Close()
		deps.Notifier = n
	}
	// Every request's context ends when the service stops, with
	// server.ErrShuttingDown as its cause: a sale still waiting for the lock
	// gives up at once; one holding it finishes within the grace period.
	base, stopping := context.WithCancelCause(context.WithoutCancel(ctx))
	running := &inFlight{}
	srv := &http.Server{Handler: running.wrap(handler(cfg, deps, rdb, steps, mx, log)), BaseContext: func(net.Listener) context.Context { return base }}
	cfg.limits().apply(srv)
	log.Info("serving", "addr", ln.Addr().String(), "lock", cfg.Lock, "lock_override", cfg.LockOverride,
		"redis", cfg.redis(), "redlock", cfg.Redlock, "etcd", cfg.Etcd, "zk", cfg.ZK, "ttl", cfg.TTL.String(), "retry", cfg.Retry.String(),
		"redlock_retry", cfg.RedlockRetry.String(), "wait", cfg.Wait, "work", cfg.Work.String(),
		"max_in_flight", cfg.MaxInFlight, "grace", cfg.limits().Grace.String())
	// The deferred closes above run only once every request has returned:
	// a holder past the grace period still releases over an open client.
	return serveUntil(ctx, srv, ln, func() { stopping(server.ErrShuttingDown) }, running, cfg.limits(), log)
}

// limits are the HTTP server's bounds, derived from the lock settings so
// that none of them cuts a legitimate sale short.
type limits struct {
	// Longest is the longest a sale can take: its wait for the lock, its
	// business time (or a chaos hold, at most server.MaxHold), its Redis
	// commands (a second each at most, redisconn's timeouts) and its release.
	Longest time.Duration
	// Grace is how long a stopping replica gives its holders to answer: a
	// waiter is cancelled at once, so only the hold counts. -grace sets it.
	Grace time.Duration
}

// redisSlack covers a sale's Redis commands: a read, a write, a fencing or
// nested step, each bounded by redisconn's one-second timeouts.
const redisSlack = 3 * time.Second

func (c config) limits() limits {
	hold := c.Work
	if c.Chaos { // a chaos hold replaces the business time
		hold = max(hold, server.MaxHold)
	}
	l := limits{
		Longest: c.AcquireTimeout + hold + redisSlack + sale.ReleaseTimeout,
		Grace:   hold + redisSlack + sale.ReleaseTimeout,
	}
	if c.Grace > 0 {
		l.Grace = c.Grace
	}
	return l
}

// The HTTP server's own limits. The idle timeout must stay above nginx's
// upstream keepalive_timeout (deploy/nginx.conf: 30s), so that nginx, not the
// service, closes an idle connection, and never sends a request on one the
// service is closing.
const (
	readHeaderTimeout = 5 * time.Second
	idleTimeout       = 75 * time.Second
	maxHeaderBytes    = 16 << 10
)

// apply sets srv's timeouts and header cap: a slow client cannot hold a
// connection forever, and a reply is never cut before the longest sale.
func (l limits) apply(srv *http.Server) {
	srv.ReadHeaderTimeout = readHeaderTimeout
	srv.ReadTimeout = readHeaderTimeout + 5*time.Second // the bodies are tiny (PUT /stock: 1 KiB at most)
	srv.WriteTimeout = l.Longest + 5*time.Second
	srv.IdleTimeout = idleTimeout
	srv.MaxHeaderBytes = maxHeaderBytes
}

// variants are the ways of building the versions this replica serves: its
// -wait and -fence, and with -lock-override every wait, with -chaos (whose
// fence=1|0 hook chooses per sale) fenced and not.
func (c config) variants() []versions.Variant {
	waits, fences := []string{c.Wait}, []bool{c.Fence}
	if c.LockOverride {
		waits = versions.Waits
	}
	if c.Chaos {
		fences = []bool{false, true}
	}
	var vs []versions.Variant
	for _, w := range waits {
		for _, f := range fences {
			vs = append(vs, versions.Variant{Wait: w, Fence: f})
		}
	}
	// The lab's lessons: a stepped sale's lock with server.LessonLease, fenced
	// or not (its fix), waiting as -wait says.
	for _, f := range []bool{false, true} {
		vs = append(vs, versions.Variant{Wait: c.Wait, Fence: f, Lease: server.LessonLease})
	}
	return vs
}

// handler builds the versions, the sale service and the HTTP routes.
func handler(cfg config, deps builder.Deps, rdb *redis.Client, steps *step.Gate, mx *metrics.Metrics, log *slog.Logger) http.Handler {
	svc := sale.New(rdb, sale.Options{Key: cfg.Key, Work: cfg.Work, AcquireTimeout: cfg.AcquireTimeout, ReplicaAck: cfg.ReplicaAck, Observer: mx})
	ready := func(ctx context.Context) error {
		if err := rdb.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("redis %s: %w", cfg.redis(), err)
		}
		return nil
	}
	var hist *history.Ring
	if cfg.History > 0 {
		hist = history.NewRing(cfg.History)
	}
	return server.New(server.Config{
		Seller: svc, Versions: builder.BuildAll(deps, cfg.variants()), Default: versions.Variant{Wait: cfg.Wait, Fence: cfg.Fence},
		Names: versions.Names(), Lock: cfg.Lock, LockKey: cfg.LockKey, Override: cfg.LockOverride,
		OverrideAdmin: !cfg.loopback(), Replica: cfg.Name, Hosts: origin.NewHosts(append(cfg.Hosts, cfg.Name, cfg.host)...),
		AdminToken: cfg.AdminToken, Chaos: cfg.Chaos, Settings: cfg.settings(), Ready: ready, Log: log,
		Recorder: mx, Metrics: mx.Handler(), History: hist, MaxInFlight: cfg.MaxInFlight, Steps: steps, LessonLease: server.LessonLease,
		Store: func(ctx context.Context) (api.Store, error) {
			return server.ReadStore(ctx, rdb, server.StoreKeys{Stock: cfg.Key, Lock: cfg.LockKey, Counter: fence.CounterKey(cfg.LockKey)})
		},
		Forget: func(ctx context.Context, owner string) (string, error) {
			return server.ForgetLock(ctx, rdb, cfg.LockKey, owner)
		},
	})
}

// settings are the lock settings /healthz reports.
func (c config) settings() map[string]string {
	return map[string]string{"lock": c.Lock, "ttl": c.TTL.String(), "retry": c.Retry.String(),
		"redlock_retry": c.RedlockRetry.String(), "wait": c.Wait, "work": c.Work.String(), "acquire_timeout": c.AcquireTimeout.String(),
		"fence": strconv.FormatBool(c.Fence), "chaos": strconv.FormatBool(c.Chaos), "replica_ack": strconv.Itoa(c.ReplicaAck),
		"db": strconv.FormatBool(c.DB != ""), "zk": strconv.FormatBool(len(c.ZK) > 0), "sentinel": strconv.FormatBool(len(c.Sentinel) > 0)}
}

// serveUntil serves on ln until ctx ends, then shuts down: stop cancels the
// requests still waiting, and in-flight sales get up to the grace period to
// finish and answer. Past it, their connections are closed (their clients
// never learn the outcome, as with a crash), but serveUntil still waits for
// every handler to return, each bounded by the longest sale, before its
// caller closes Redis: a holder is never left without the client it needs to
// write and release (v3's lock, which has no expiry, would stay forever).
func serveUntil(ctx context.Context, srv *http.Server, ln net.Listener, stop func(), running *inFlight, l limits, log *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: cancelling waiters, finishing holders", "grace", l.Grace.String())
	stop()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.Grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("grace period over: closing the connections of the sales still running; each still finishes and releases its lock before Redis is closed",
			"grace", l.Grace.String(), "running", running.count())
		_ = srv.Close()
		if !running.wait(l.Longest) {
			return fmt.Errorf("shutdown: %d requests still running %s after the grace period", running.count(), l.Longest)
		}
		log.Info("stopped after the grace period: every sale still running finished")
		return nil
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("stopped")
	return nil
}

// inFlight counts the requests inside the handler, so that shutdown can wait
// for them after http.Server has stopped tracking their connections.
type inFlight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed while n is 0 and someone waits
}

func (f *inFlight) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.n++
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			if f.n--; f.n == 0 && f.idle != nil {
				close(f.idle)
				f.idle = nil
			}
			f.mu.Unlock()
		}()
		next.ServeHTTP(w, r)
	})
}

func (f *inFlight) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// wait reports whether no request is inside within limit.
func (f *inFlight) wait(limit time.Duration) bool {
	f.mu.Lock()
	if f.n == 0 {
		f.mu.Unlock()
		return true
	}
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	idle := f.idle
	f.mu.Unlock()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-idle:
		return true
	case <-t.C:
		return false
	}
}

// redisLogger sends go-redis's own messages (failed dials, pool trouble) to
// slog at debug: each failure they describe already reaches the caller as an
// error, which is logged at warn where it is handled.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, fmt.Sprintf(format, v...), "source", "go-redis")
}

// gateLimit is how long -probe-stay tries before it gives up: longer than a
// stack takes to start, or nginx to try a restarted replica again.
const gateLimit = time.Minute

// gate probes url once a second until it answers 200, then stays up until
// ctx ends (SIGTERM): a Compose service that is running, and healthy, once
// the stack serves. It exits 1 if url never answers within gateLimit.
func gate(ctx context.Context, url string, stderr io.Writer) int {
	deadline := time.Now().Add(gateLimit)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for cli.Probe(ctx, url, io.Discard) != 0 {
		if time.Now().After(deadline) {
			return cli.Probe(ctx, url, stderr) // the last try says why
		}
		select {
		case <-ctx.Done():
			return 1
		case <-tick.C:
		}
	}
	fmt.Fprintln(stderr, "probe:", url, "answered 200; staying up until stopped")
	<-ctx.Done()
	return 0
}

// zkMaxSession is the longest session the ensembles here grant (their
// maxSessionTimeout): the zk lock counts the timeout it asked for, so it
// never asks for more.
const zkMaxSession = 60 * time.Second

// dialZK is the zk lock's session on members (nil for none), of -ttl (at
// most zkMaxSession): in the background, as the etcd client, so a replica
// whose ensemble is down serves every other version.
func dialZK(members []string, ttl time.Duration, log *slog.Logger) (*zk.Session, error) {
	if len(members) == 0 {
		return nil, nil
	}
	return zk.Dial(members, zk.SessionOptions{Timeout: min(ttl, zkMaxSession), Log: log.With("lock", "zk")})
}

// openDB is the database locks' pools of connections to dsn (nil for
// none): the polling locks' (db, db-seed), and db-getlock's, which holds a
// connection for each hold and waits in the server (dblock.OpenHolds).
// Lazy, as the etcd client is, so a replica whose database is down serves
// every other version and the db locks answer 503. The driver's own log
// lines go to log.
func openDB(dsn string, log *slog.Logger) (polls, holds *sql.DB, err error) {
	if dsn == "" {
		return nil, nil, nil
	}
	_ = mysql.SetLogger(driverLog{log})
	if polls, err = dblock.Open(dsn); err != nil {
		return nil, nil, fmt.Errorf("-db: %w", err)
	}
	if holds, err = dblock.OpenHolds(dsn); err != nil {
		polls.Close()
		return nil, nil, fmt.Errorf("-db: %w", err)
	}
	return polls, holds, nil
}

// driverLog puts the MariaDB driver's log lines in the service's log.
type driverLog struct{ log *slog.Logger }

func (d driverLog) Print(v ...any) { d.log.Warn("mariadb driver", "msg", fmt.Sprint(v...)) }
