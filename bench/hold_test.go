package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/cluster"
	"github.com/locklab/locklab/internal/metrics"
	"github.com/locklab/locklab/internal/sale"
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
		}
		mx.Held(sale.Method{Name: "v4", Wait: "notify"}, time.Second) // another wait: not summed
		mx.Held(sale.Method{Name: "v6", Wait: "poll"}, time.Second)   // another version: not summed
		srv := httptest.NewServer(mx.Handler())
		t.Cleanup(srv.Close)
		reps = append(reps, cluster.Proc{Name: fmt.Sprint("inventory-", i+1), Addr: strings.TrimPrefix(srv.URL, "http://")})
	}
	h, err := replicaHolds(context.Background(), http.DefaultClient, reps, "v4", "poll")
	if err != nil {
		t.Fatal(err)
	}
	if h.count != 3 || h.mean() < 199 || h.mean() > 201 {
		t.Fatalf("got %d holds, mean %.1f us; want 3 holds, mean 200 us", h.count, h.mean())
	}
}
