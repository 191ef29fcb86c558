// Package servicetest runs one replica of the real service over a real
// redis-server in the test's process, behind a mux that routes
// /replica/NAME/ to it as nginx does: for the tests of what drives the
// service (the load test, the lab).
package servicetest

import (
	"context"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/builder"
	"github.com/locklab/locklab/internal/history"
	"github.com/locklab/locklab/internal/locks/fence"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/internal/sale"
	"github.com/locklab/locklab/internal/server"
	"github.com/locklab/locklab/internal/step"
	"github.com/locklab/locklab/internal/versions"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// ClientGoroutines are what a client of the service (internal/client) leaves
// running by design, for goleak to ignore: fasthttp's cleaners of its idle
// connections, which stop by themselves once idle, and its dialer's address
// cache, which lives as long as the process.
var ClientGoroutines = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
	goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
	goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
}

// Start runs the replica called name (-lock v1, -lock-override, polling
// every millisecond, its history kept, no database: db answers 503, its
// step gate on, stepped sales with the lesson's lease, GET /store) and returns its base URL: /sale,
// /stock, /history, and /replica/NAME/... for each. Stopped by the test's
// cleanup.
func Start(tb testing.TB, name string) string {
	tb.Helper()
	return StartWith(tb, name, nil)
}

// StartWith is Start with more settings reported on /healthz, as a replica
// started otherwise reports them (chaos "false": make up's replicas).
func StartWith(tb testing.TB, name string, settings map[string]string) string {
	tb.Helper()
	reported := map[string]string{"lock": "v1", "db": "false", "zk": "false"} // no database, no ZooKeeper, as the Compose stack
	maps.Copy(reported, settings)
	srv := redistest.Start(tb)
	rdb := srv.Client()
	rdb.AddHook(step.Hook{}) // the lab's lessons step its sales, as the service's
	steps := step.New(step.Options{})
	tb.Cleanup(steps.Close)
	poll := versions.Variant{Wait: "poll"}
	deps := builder.Deps{Redis: rdb, Redlock: []redis.UniversalClient{rdb}, LockKey: "lock", Retry: time.Millisecond, RedlockRetry: time.Millisecond}
	all := builder.BuildAll(deps,
		[]versions.Variant{poll, {Wait: "poll", Lease: server.LessonLease}, {Wait: "poll", Fence: true, Lease: server.LessonLease}})
	svc := sale.New(rdb, sale.Options{})
	h := server.New(server.Config{Seller: svc, Versions: all, Default: poll, Names: versions.Names(),
		Lock: "v1", Override: true, Replica: name, Log: slog.New(slog.DiscardHandler),
		Ready: func(context.Context) error { return nil }, History: history.NewRing(10000),
		Settings: reported, Steps: steps, LessonLease: server.LessonLease,
		Store: func(ctx context.Context) (api.Store, error) {
			return server.ReadStore(ctx, rdb, server.StoreKeys{Stock: svc.Key(), Lock: "lock", Counter: fence.CounterKey("lock")})
		},
		Queues: builder.NewQueues(deps)})

	mux := http.NewServeMux()
	mux.Handle("/replica/"+name+"/", http.StripPrefix("/replica/"+name, h))
	mux.Handle("/", h)
	ts := httptest.NewServer(mux)
	tb.Cleanup(ts.Close)
	return ts.URL
}
