package metrics_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/locklab/locklab/internal/metrics"
	"github.com/locklab/locklab/internal/redisconn"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Every command is one round trip, and so is a pipeline, whatever it holds;
// INFO commandstats would count a script's inner commands too.
func TestRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redisconn.New(srv.Addr, "")
	defer rdb.Close()
	mx := metrics.New()
	rdb.AddHook(mx.RoundTrips(srv.Addr))
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil { // the connection's own set-up is counted too: done first
		t.Fatal(err)
	}
	// And a pipeline's connection's (go-redis keeps pipelines' connections
	// apart, with their own buffers): its HELLO once made an uncounted
	// pipeline look counted.
	if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error { p.Ping(ctx); return nil }); err != nil {
		t.Fatal(err)
	}
	before := trips(t, mx, srv.Addr)
	rdb.Set(ctx, "k", 1, 0)
	rdb.Get(ctx, "k")
	rdb.Eval(ctx, "redis.call('GET', KEYS[1]); return redis.call('GET', KEYS[1])", []string{"k"})
	pipe := rdb.Pipeline()
	pipe.Get(ctx, "k")
	pipe.Get(ctx, "k")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if got := trips(t, mx, srv.Addr) - before; got != 4 {
		t.Fatalf("%v round trips counted, want 4 (SET, GET, one script, one pipeline)", got)
	}
}

// trips reads locklab_redis_round_trips_total for node from /metrics.
func trips(t *testing.T, mx *metrics.Metrics, node string) float64 {
	t.Helper()
	w := httptest.NewRecorder()
	mx.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(w.Body)
	prefix := `locklab_redis_round_trips_total{node="` + node + `"} `
	for l := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("/metrics has no %s", prefix)
	return 0
}
