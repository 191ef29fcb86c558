//go:build e2e

// Package e2e runs the local cluster for real (redis-server, the replicas,
// nginx; deploy/local/cluster.sh, as `make up` does) and asserts the demo's
// claims: none, v1 and v2 oversell on two replicas, every other version never
// does, nginx spreads the requests, and `down` leaves nothing behind.
//
//	make test-e2e
package e2e

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/loadtest"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/internal/scenario"
	"github.com/locklab/locklab/internal/versions"
	"github.com/redis/go-redis/v9"
)

// cluster runs deploy/local/cluster.sh with nginx on port and its run
// directory in dir.
func cluster(t *testing.T, port int, dir, verb string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "../deploy/local/cluster.sh", verb)
	cmd.Env = append(append(os.Environ(), "PORT="+strconv.Itoa(port), "RUN_DIR="+dir, "LOCK=v1", "REPLICAS=2"), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func portOpen(port int) bool {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}

func pids(t *testing.T, dir string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
	var all []string
	for _, f := range files {
		b, _ := os.ReadFile(f)
		all = append(all, filepath.Base(f)+"="+strings.TrimSpace(string(b)))
	}
	return strings.Join(all, " ")
}

func TestLocalCluster(t *testing.T) {
	port := redistest.FreePort(t)
	dir := t.TempDir()
	ports := []int{6381, 6382, 6383, 8080, 8081, port}

	// A port already taken is a clear error naming it, and nothing starts.
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	out, err := cluster(t, port, dir, "up")
	ln.Close()
	if err == nil || !strings.Contains(out, "port "+strconv.Itoa(port)+" is already in use") {
		t.Fatalf("up with port %d taken: err %v, output:\n%s", port, err, out)
	}
	for _, p := range ports[:5] {
		if portOpen(p) {
			t.Fatalf("port %d open after a refused up", p)
		}
	}

	t.Cleanup(func() {
		if out, err := cluster(t, port, dir, "down"); err != nil {
			t.Errorf("down: %v\n%s", err, out)
		}
		for _, p := range ports {
			if portOpen(p) {
				t.Errorf("port %d still open after down", p)
			}
		}
		if left := pids(t, dir); left != "" {
			t.Errorf("pid files left after down: %s", left)
		}
	})
	if out, err := cluster(t, port, dir, "up"); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	first := pids(t, dir)
	if out, err := cluster(t, port, dir, "up"); err != nil || !strings.Contains(out, "already up") || pids(t, dir) != first {
		t.Fatalf("second up: err %v, pids %s then %s, output:\n%s", err, first, pids(t, dir), out)
	}

	cfg := loadtest.Config{URL: "http://127.0.0.1:" + strconv.Itoa(port) + "/sale",
		Requests: 1000, Concurrency: 100, Stock: 100, Client: loadtest.NewClient(100)}
	for run := 1; run <= 3; run++ {
		for _, v := range versions.All {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			r, err := loadtest.Run(ctx, cfg, v.Name)
			cancel()
			if err != nil {
				t.Fatalf("run %d, %s: %v", run, v.Name, err)
			}
			t.Logf("run %d %-8s sold %4d oversold %4d failed %d p99 %.0fms replicas %v",
				run, v.Name, r.Sold, r.Oversold, r.Failed, r.Latency.P99, r.Replicas)
			switch {
			case v.Safe && r.Oversold != 0:
				t.Errorf("run %d: %s oversold %d; it must never oversell", run, v.Name, r.Oversold)
			case !v.Safe && r.Oversold <= 0:
				t.Errorf("run %d: %s did not oversell on two replicas", run, v.Name)
			}
			if r.Failed != 0 {
				t.Errorf("run %d: %s failed %d requests (%v): waiting requests must be served", run, v.Name, r.Failed, r.FailedBy)
			}
			for _, name := range []string{"inventory-1", "inventory-2"} {
				if n := r.Replicas[name]; n < cfg.Requests*2/5 {
					t.Errorf("run %d: %s: %s served %d of %d requests; nginx should alternate", run, v.Name, name, n, cfg.Requests)
				}
			}
		}
	}
}

// Every cell of the scenario matrix, three runs in a row, on a cluster with the
// fault hooks on and a 1 s lease (as make scenarios runs it).
func TestScenarios(t *testing.T) {
	port := redistest.FreePort(t)
	dir := t.TempDir()
	env := []string{"INVENTORY_CHAOS=true", "INVENTORY_ADMIN_TOKEN=e2e", "INVENTORY_TTL=1s", "INVENTORY_ACQUIRE_TIMEOUT=5s"}
	t.Cleanup(func() {
		if out, err := cluster(t, port, dir, "down"); err != nil {
			t.Errorf("down: %v\n%s", err, out)
		}
	})
	if out, err := cluster(t, port, dir, "up", env...); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/sale"
	_, settings, err := loadtest.Settings(loadtest.Config{URL: url, Client: loadtest.NewClient(1)})
	if err != nil || settings["chaos"] != "true" {
		t.Fatalf("settings %v, err %v: want the replicas running with -chaos", settings, err)
	}
	ttl, err := time.ParseDuration(settings["ttl"])
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6381"})
	defer rdb.Close()
	senv := scenario.Env{URL: url, AdminToken: "e2e", Redis: rdb, LockKey: "inventoryRedisLock",
		StockKey: "inventory:001", TTL: ttl, Client: &http.Client{Timeout: time.Minute},
		Replicas: scenario.LocalReplicas}
	local := scenario.Local{RunDir: dir, Script: "../deploy/local/cluster.sh"}
	senv.Freeze, senv.Crash, senv.FreezeStockNode, senv.CrashSpareNode = local.Freeze, local.Crash, local.FreezeStockNode, local.CrashSpareNode
	for run := 1; run <= 3; run++ {
		for _, s := range scenario.All {
			for _, lock := range versions.Names() {
				if _, ok := s.Expect[lock]; !ok {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				c, err := s.Run(ctx, senv, lock)
				cancel()
				if err != nil {
					t.Fatalf("run %d, %s, %s: %v", run, s.Name, lock, err)
				}
				t.Logf("run %d %-12s %-3s %-36s %s", run, c.Scenario, c.Lock, c.Observed, c.Detail)
				if !c.OK() {
					t.Errorf("run %d: %s under %s: expected %q, observed %q (%s)", run, lock, s.Name, c.Expected, c.Observed, c.Detail)
				}
			}
		}
	}
}
