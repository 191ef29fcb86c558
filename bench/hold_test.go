package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/client"
	"github.com/locklab/locklab/internal/cluster"
	"github.com/locklab/locklab/internal/metrics"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/internal/sale"
	"github.com/redis/go-redis/v9"
)

// The bench sums one version's holds over every replica's real /metrics, and
// only that version's with that wait.
func TestReplicaHolds(t *testing.T) {
	var reps []cluster.Proc
	v4 := sale.Method{Name: "v4", Wait: "poll"}
	for i, held := range [][]time.Duration{{100 * time.Microsecond, 300 * time.Microsecond}, {200 * time.Microsecond}} {
		mx := metrics.New()
		for _, d := range held {
			mx.Held(v4, d)
			mx.Attempts("v4", "poll", 3)
		}
		mx.Held(sale.Method{Name: "v4", Wait: "notify"}, time.Second) // another wait: not summed
		mx.Held(sale.Method{Name: "v6", Wait: "poll"}, time.Second)   // another version: not summed
		srv := httptest.NewServer(mx.Handler())
		t.Cleanup(srv.Close)
		reps = append(reps, cluster.Proc{Name: fmt.Sprint("inventory-", i+1), Addr: strings.TrimPrefix(srv.URL, "http://")})
	}
	h, err := replicaHolds(context.Background(), client.New("", ""), reps, holdMetric, "v4", "poll")
	if err != nil {
		t.Fatal(err)
	}
	if h.count != 3 || h.mean() < 199 || h.mean() > 201 {
		t.Fatalf("got %d holds, mean %.1f us; want 3 holds, mean 200 us", h.count, h.mean())
	}
	a, err := replicaHolds(context.Background(), client.New("", ""), reps, attemptsMetric, "v4", "poll")
	if err != nil {
		t.Fatal(err)
	}
	if a.count != 3 || a.seconds != 9 {
		t.Fatalf("got %d acquisitions, %v attempts; want 3 and 9", a.count, a.seconds)
	}
}

// The bench counts the commands a real Redis ran, less its own INFO.
func TestCommands(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	nodes := []redis.UniversalClient{rdb}
	before, err := commands(ctx, nodes)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		rdb.Set(ctx, "k", 1, 0)
		rdb.Get(ctx, "k")
	}
	after, err := commands(ctx, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if after-before != 10 {
		t.Fatalf("counted %d commands, want 10 (5 SET, 5 GET; INFO not counted)", after-before)
	}
}
