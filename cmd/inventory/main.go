// Command inventory is the locklab service: it sells one unit of stock per
// POST /sale, guarded by the lock version chosen with -lock.
package main

import (
	"context"
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
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/builder"
	"github.com/locklab/locklab/internal/cli"
	"github.com/locklab/locklab/internal/history"
	"github.com/locklab/locklab/internal/locks/etcd"
	"github.com/locklab/locklab/internal/locks/fence"
	"github.com/locklab/locklab/internal/locks/retry"
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
	names := make([]string, len(nodes))
	for i, n := range nodes {
		// Each Redlock node's steps carry its name: the lesson shows which
		// node granted, refused, or was down.
		names[i] = redisconn.NodeName(cfg.Redlock[i])
		n.AddHook(mx.RoundTrips(cfg.Redlock[i]))
		n.AddHook(step.Hook{Node: names[i]})
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
	deps := builder.Deps{Redis: rdb, Sentinels: cfg.Sentinel, SentinelMaster: cfg.SentinelMaster, Redlock: nodes, RedlockNames: names, Etcd: ecli, DB: dbc, DBHolds: holds, ZK: zks, LockKey: cfg.LockKey, TTL: cfg.TTL, Retry: cfg.Retry, Claim: cfg.Claim, ReplicaAck: cfg.ReplicaAck,
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
		Queues: builder.NewQueues(deps),
		Forget: func(ctx context.Context, owner string) (string, error) {
			return server.ForgetLock(ctx, rdb, cfg.LockKey, owner)
		},
	})
}

// settings are the lock settings /healthz reports.
func (c config) settings() map[string]string {
	return map[string]string{"lock": c.Lock, "ttl": c.TTL.String(), "retry": c.Retry.String(),
		"redlock_retry": c.RedlockRetry.String(), "wait": c.Wait, "work": c.Work.String(), "acquire_timeout": c.AcquireTimeout.String(), "claim": c.Claim.String(),
		"fence": strconv.FormatBool(c.Fence), "chaos": strconv.FormatBool(c.Chaos), "replica_ack": strconv.Itoa(c.ReplicaAck),
		"db": strconv.FormatBool(c.DB != ""), "zk": strconv.FormatBool(len(c.ZK) > 0), "sentinel": strconv.FormatBool(len(c.Sentinel) > 0)}
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
