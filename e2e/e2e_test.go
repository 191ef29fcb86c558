//go:build e2e

// Package e2e runs the local cluster for real (redis-server, the replicas,
// nginx; the cluster command, as `make up` does) and asserts the demo's
// claims: none, v1 and v2 oversell on two replicas, every other version never
// does, nginx spreads the requests, and `down` leaves nothing behind; and it
// runs every scenario cell.
//
//	make test-e2e
package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/cluster"
	"github.com/locklab/locklab/internal/loadtest"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/internal/scenario"
	"github.com/locklab/locklab/internal/scenario/stores"
	"github.com/locklab/locklab/internal/versions"
	"github.com/redis/go-redis/v9"
)

// clusterBin builds the cluster command once per test.
func clusterBin(t testing.TB) string { return goBuild(t, "../cmd/cluster") }

// loadtestBin builds the load test's command once per test.
func loadtestBin(t *testing.T) string { return goBuild(t, "../loadtest") }

func goBuild(t testing.TB, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// run runs the cluster command from the checkout's root, as make does, with
// nginx on port and the run directory dir.
func run(t testing.TB, bin string, port int, dir, verb string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, verb)
	cmd.Dir = ".."
	cmd.Env = append(append(os.Environ(), "PORT="+strconv.Itoa(port), "RUN_DIR="+dir, "LOCK=v1", "REPLICAS=2"), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// up starts the cluster and registers its stop, which must leave no port
// open and no state behind.
func up(t testing.TB, bin string, port int, dir string, env ...string) *cluster.Cluster {
	t.Helper()
	t.Cleanup(func() {
		if out, err := run(t, bin, port, dir, "down"); err != nil {
			t.Errorf("down: %v\n%s", err, out)
		}
		for _, addr := range cluster.Plan(cluster.Config{Port: port, Dir: dir, Faults: true, Sentinel: true}).Addrs() {
			if listening(addr) {
				t.Errorf("%s still open after down", addr)
			}
		}
		if _, err := cluster.Load(dir); err == nil {
			t.Error("the state file is left after down")
		}
	})
	if out, err := run(t, bin, port, dir, "up", env...); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	c, err := cluster.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	private(t, c, dir)
	return c
}

// private asserts what other users of the machine can learn of the running
// cluster c: no process's command line (/proc/PID/cmdline, which anyone
// reads) holds the Redis password or the admin token, and the run directory
// is 0700 with every file up wrote in it, or in nginx's, 0600.
func private(t testing.TB, c *cluster.Cluster, dir string) {
	t.Helper()
	s := c.State
	procs := append(append(append([]cluster.Proc{s.Nginx, *s.Lab, *s.DB}, s.Redis...), s.Etcd...), s.Replicas...)
	procs = append(append(procs, s.Standbys...), s.Sentinels...)
	if s.Toxiproxy != nil {
		procs = append(procs, *s.Toxiproxy)
	}
	for _, p := range procs {
		raw, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/cmdline")
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		for _, secret := range []string{s.RedisPassword, s.AdminToken} {
			if secret != "" && bytes.Contains(raw, []byte(secret)) {
				t.Errorf("%s's command line holds a secret: %q", p.Name, raw)
			}
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("run directory %s: %v, mode %v; want 0700", dir, err, fi.Mode().Perm())
	}
	for _, d := range []string{dir, filepath.Join(dir, "nginx")} {
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm() != 0o600 {
				t.Errorf("%s has mode %04o, want 0600", filepath.Join(d, e.Name()), fi.Mode().Perm())
			}
		}
	}
}

func TestLocalCluster(t *testing.T) {
	bin := clusterBin(t)
	port := redistest.FreePort(t)
	dir := t.TempDir()

	// A port already taken is a clear error naming it, and nothing starts.
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	out, err := run(t, bin, port, dir, "up")
	ln.Close()
	if err == nil || !strings.Contains(out, "port "+strconv.Itoa(port)+" is already in use") {
		t.Fatalf("up with port %d taken: err %v, output:\n%s", port, err, out)
	}
	for _, addr := range cluster.Plan(cluster.Config{Port: port, Dir: dir}).Addrs() {
		if listening(addr) {
			t.Fatalf("%s open after a refused up", addr)
		}
	}

	// Closed by default: even with INVENTORY_BIND=0.0.0.0 in the
	// environment, every socket the cluster listens on is loopback, as the
	// kernel's socket table says.
	c := up(t, bin, port, dir, "INVENTORY_BIND=0.0.0.0")
	sockets, err := c.State.Listening()
	if err != nil {
		t.Fatal(err)
	}
	if want := len(c.State.Redis) + len(c.State.Etcd) + len(c.State.ZK) + len(c.State.Replicas) + 3; len(sockets) != want { // + nginx, the lab and MariaDB
		t.Errorf("listening sockets found for %d processes, want %d: %v", len(sockets), want, sockets)
	}
	for name, addrs := range sockets {
		for _, a := range addrs {
			if !a.Addr().IsLoopback() {
				t.Errorf("%s listens on %s: not a loopback address", name, a)
			}
		}
	}
	t.Logf("listening: %v", sockets)

	// Another site's page, in the browser of a learner who runs make up,
	// cannot sell, set the stock or start a run: not through nginx, not on
	// a replica's or the lab's own port, not with ?lock=none.
	var replicas []string
	for _, r := range c.State.Replicas {
		replicas = append(replicas, r.Addr)
	}
	otherSitesChangeNothing(t, stackUnderAttack{base: fmt.Sprintf("http://localhost:%d", port), replicas: replicas, lab: c.State.Lab.Addr})
	if out, err := run(t, bin, port, dir, "up"); err != nil || !strings.Contains(out, "already up") {
		t.Fatalf("second up: err %v, output:\n%s", err, out)
	}
	if again, err := cluster.Load(dir); err != nil || again.State.Nginx.Pid != c.State.Nginx.Pid {
		t.Fatalf("a second up started another set (err %v)", err)
	}

	cfg := loadtest.Config{URL: c.State.URL, Requests: 1000, Concurrency: 100, Stock: 100}
	for run := 1; run <= 3; run++ {
		for _, v := range versions.All {
			// v3-v8 also queued: notified, and handed the lock.
			waits := []string{""}
			if v.Wait {
				waits = append(waits, "notify", "handoff")
			}
			// The database locks poll MariaDB, unfairly: at 100 at once
			// their tail passed the 10 s acquire deadline for one request
			// of 1000 (CI, 2026-11-27: db, p99 6.3 s), the polling lesson
			// and not the cluster's, which this test is about; at 25 every
			// request must still be served (as e2e-compose runs them).
			vcfg := cfg
			if v.Needs == "db" {
				vcfg.Concurrency = 25
			}
			for _, wait := range waits {
				checkRun(t, c, vcfg, run, v, wait)
			}
		}
	}
}

// checkRun runs the default load test on version v, waiting as wait says
// ("": the replicas' -wait), and asserts what the demo claims of it.
func checkRun(t *testing.T, c *cluster.Cluster, cfg loadtest.Config, run int, v versions.Version, wait string) {
	t.Helper()
	cfg.Wait = wait
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	r, err := loadtest.Run(ctx, cfg, v.Name)
	cancel()
	name := strings.TrimSpace(v.Name + " " + wait)
	if err != nil {
		t.Fatalf("run %d, %s: %v", run, name, err)
	}
	t.Logf("run %d %-12s sold %4d oversold %4d two holders %4d lost updates %4d linearizable %-8s failed %d unknown %d p99 %.0fms replicas %v",
		run, name, r.Sold, r.Oversold, r.TwoHolders, r.LostUpdates, r.Linearizability, r.Failed, r.Unknown, r.Latency.P99, r.Replicas)
	if !r.HistoryChecked {
		t.Fatalf("run %d, %s: the replicas' history was not checked: %s", run, name, r.HistoryNote)
	}
	// The evidence, not only the count: the unsafe versions show two
	// holders (v2: two process mutexes) or lost updates (none: no lock); the
	// safe ones show neither and are linearizable.
	switch {
	case v.Safe && (r.Oversold != 0 || r.TwoHolders != 0 || r.LostUpdates != 0 || !r.Linearizable):
		t.Errorf("run %d: %s oversold %d, two holders %d, lost updates %d, linearizability %s; it must show none of them",
			run, name, r.Oversold, r.TwoHolders, r.LostUpdates, r.Linearizability)
	case !v.Safe && (r.Oversold <= 0 || r.TwoHolders+r.LostUpdates == 0 || r.Linearizable):
		t.Errorf("run %d: %s oversold %d, two holders %d, lost updates %d, linearizability %s; want an oversell the checker sees",
			run, name, r.Oversold, r.TwoHolders, r.LostUpdates, r.Linearizability)
	}
	switch {
	case r.NotServed() != 0 && v.LostWakeup != "":
		// The library can leave a waiter parked until its deadline (a lost
		// wake-up, measured: the catalogue says where): a finding, said, not ours.
		t.Logf("run %d: %s: %d requests not served (%v): the library's lost wake-up", run, name, r.NotServed(), r.FailedBy)
	case r.NotServed() != 0:
		t.Errorf("run %d: %s: %d requests failed or unknown (%v): waiting requests must be served", run, name, r.NotServed(), r.FailedBy)
	}
	for _, rep := range c.State.Replicas {
		n := r.Replicas[rep.Name]
		switch {
		case v.OneReplica && n != 0 && n != cfg.Requests:
			t.Errorf("run %d: %s ran on more than one replica (%v); the tutorial runs it on one", run, name, r.Replicas)
		case !v.OneReplica && n < cfg.Requests*2/5:
			t.Errorf("run %d: %s: %s served %d of %d requests; nginx should alternate", run, name, rep.Name, n, cfg.Requests)
		}
	}
}

// Every cell of the scenario matrix on a cluster with the fault hooks on
// and a 1 s lease (as make scenarios runs it), once: the matrix's cells
// take about 250 s a run on 2 cores, and CI is kept near 30 minutes (it
// ran them twice until the step-through's tests and the Compose story took
// CI to 48 minutes). LOCKLAB_SCENARIO_RUNS=N runs them N times in a row
// (make test-e2e-soak: 3); make scenarios and make mutations run them too.
func TestScenarios(t *testing.T) {
	runs := 1
	if v := os.Getenv("LOCKLAB_SCENARIO_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("LOCKLAB_SCENARIO_RUNS=%q: want a number of runs, 1 or more", v)
		}
		runs = n
	}
	scenarios(t, scenarioCluster(t, "FAULTS=1", "INVENTORY_CHAOS=true", "INVENTORY_TTL=1s", "INVENTORY_ACQUIRE_TIMEOUT=5s"), runs)
}

// scenarioCluster starts a local cluster with settings and returns its
// scenario Env, closed when the test ends.
func scenarioCluster(t *testing.T, settings ...string) scenario.Env {
	t.Helper()
	c := up(t, clusterBin(t), redistest.FreePort(t), t.TempDir(), settings...)
	h, err := loadtest.Config{URL: c.State.URL}.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	env, err := stores.Local(c, h, c.State.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	return env
}

// The scenarios that need Redis Sentinel watching the stock's node, on a
// cluster of their own as make scenarios' second pass runs them
// (failover-sentinel: Sentinel, not the scenario, promotes a standby). Once:
// its four cells take about 20 s each (a failover and a failback), and CI is
// kept near 30 minutes; make scenarios runs them again.
func TestScenariosSentinel(t *testing.T) {
	env := scenarioCluster(t, "SENTINEL=1", "FAULTS=1", "INVENTORY_CHAOS=true", "INVENTORY_TTL=15s", "INVENTORY_ACQUIRE_TIMEOUT=5s")
	if n := scenarios(t, env, 1); n != 4 {
		t.Errorf("%d cells ran on the Sentinel cluster; want 4 (failover-sentinel and +ack, v6 and v8)", n)
	}
}

// scenarios runs every cell that fits env, runs times over, and says how
// many ran.
func scenarios(t *testing.T, env scenario.Env, runs int) (ran int) {
	t.Helper()
	for run := 1; run <= runs; run++ {
		for _, s := range scenario.All {
			if s.Unfit(env) != "" {
				continue
			}
			for _, lock := range versions.Names() {
				if _, ok := s.Expect[lock]; !ok {
					continue
				}
				ran++
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				cell, err := s.Run(ctx, env, lock)
				cancel()
				if err != nil {
					t.Fatalf("run %d, %s, %s: %v", run, s.Name, lock, err)
				}
				t.Logf("run %d %-12s %-3s %-36s %s", run, cell.Scenario, cell.Lock, cell.Observed, cell.Detail)
				if !cell.OK() {
					t.Errorf("run %d: %s under %s: expected %q, observed %q (%s)", run, lock, s.Name, cell.Expected, cell.Observed, cell.Detail)
				}
			}
		}
	}
	return ran
}

// The secrets as make scenarios has them, with a Redis password too: up
// makes the admin token (a random one), every process gets it and the
// password other than on its command line (up checks that, and the run
// directory's modes), and the load test's command, given neither, reads
// both from the cluster's state: the failover scenario runs (the standby
// replicates from the stock's node with the password from its file).
func TestSecrets(t *testing.T) {
	bin, lt := clusterBin(t), loadtestBin(t)
	port := redistest.FreePort(t)
	dir := t.TempDir()
	password := rand.Text()
	c := up(t, bin, port, dir, "FAULTS=1", "INVENTORY_CHAOS=true", "INVENTORY_REDIS_PASSWORD="+password, "INVENTORY_TTL=1s", "INVENTORY_ACQUIRE_TIMEOUT=5s")
	if c.State.RedisPassword != password || len(c.State.AdminToken) < 26 {
		t.Fatalf("state: password %q, admin token %q; want the given password and a random token", c.State.RedisPassword, c.State.AdminToken)
	}
	if raw, err := os.ReadFile(cluster.AdminTokenFile(dir)); err != nil || strings.TrimSpace(string(raw)) != c.State.AdminToken {
		t.Fatalf("%s: %q, %v; want the state's token", cluster.AdminTokenFile(dir), raw, err)
	}
	cmd := exec.Command(lt, "-url", c.State.URL, "-run-dir", dir, "-scenario", "failover", "-lock", "v6")
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "INVENTORY_") })
	out, err := cmd.CombinedOutput()
	t.Logf("loadtest -scenario failover -lock v6:\n%s", out)
	if err != nil {
		t.Fatalf("loadtest: %v", err)
	}
}

// The nemesis through the load test's command, on a cluster like make
// nemesis starts: with seed 1, v7 unfenced harms the stock within 20 s (the
// schedule's slow holder at about 5 s outlives its lease, and nothing tells
// it: v7 has no watchdog and no lost signal), and fenced it does not, over
// the same schedule. (redlock was the version here until its lease's lost
// signal closed at its validity, stop 36: the slow holder now stops before
// its write, and seed 1's 20 s hold no fault that beats the check.)
func TestNemesis(t *testing.T) {
	bin, lt := clusterBin(t), loadtestBin(t)
	port := redistest.FreePort(t)
	dir := t.TempDir()
	c := up(t, bin, port, dir, "FAULTS=1", "WORK=20ms", "INVENTORY_CHAOS=true", "INVENTORY_TTL=1s", "INVENTORY_ACQUIRE_TIMEOUT=5s")
	for _, tc := range []struct {
		flags []string
		want  []string
	}{
		{[]string{"-expect-unsafe"}, []string{`"violation":true`}},
		{[]string{"-fence", "-expect-safe"}, []string{`"violation":false`, `"linearizable":true`}},
	} {
		args := append([]string{"-url", c.State.URL, "-run-dir", dir, "-nemesis", "-duration", "20s",
			"-seed", "1", "-lock", "v7", "-json"}, tc.flags...)
		out, err := exec.Command(lt, args...).CombinedOutput()
		t.Logf("loadtest %s:\n%s", strings.Join(args, " "), out)
		if err != nil {
			t.Fatalf("loadtest %v: %v", tc.flags, err)
		}
		for _, want := range tc.want {
			if !strings.Contains(string(out), want) {
				t.Fatalf("loadtest %v: no %s in its verdict", tc.flags, want)
			}
		}
	}
}

// A replica stopped with SIGTERM in the middle of a load test on v3 (the
// lock with no expiry, which a lost release would leave forever): its
// waiters give up, its holders finish and release, nginx sends the rest to
// the other replica. No lock key is left, and no sale is lost: every unit
// the stock lost was answered sold (or may have been: unknown), every sale
// answered is in the stock, and the requests are linearizable.
func TestSIGTERMUnderLoad(t *testing.T) {
	bin := clusterBin(t)
	port := redistest.FreePort(t)
	dir := t.TempDir()
	c := up(t, bin, port, dir)
	rdb := redis.NewClient(&redis.Options{Addr: c.State.StockNode().Addr})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const stock = 50000
	cfg := loadtest.Config{URL: c.State.URL, Requests: 4000, Concurrency: 32, Stock: stock}
	type outcome struct {
		r   loadtest.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := loadtest.Run(ctx, cfg, "v3")
		done <- outcome{r, err}
	}()
	// Observable state, not a sleep: the load test has set the stock, and
	// then sold a few hundred units.
	reset := false
	for {
		n, err := rdb.Get(ctx, c.State.StockKey).Int64()
		if err != nil {
			t.Fatal(err)
		}
		reset = reset || n >= stock-100
		if reset && n <= stock-300 {
			break
		}
		select {
		case o := <-done:
			t.Fatalf("the load test ended before the replica could be stopped: %+v, %v", o.r, o.err)
		case <-time.After(2 * time.Millisecond):
		}
	}
	victim := c.State.Replicas[0]
	restart, err := c.Terminate(victim.Name)
	if err != nil {
		t.Fatal(err)
	}
	o := <-done
	if err := restart(ctx); err != nil {
		t.Fatal(err)
	}
	if o.err != nil {
		t.Fatal(o.err)
	}
	r := o.r
	taken := r.StockBefore - r.StockAfter
	t.Logf("SIGTERM %s mid-run: sold %d, taken %d, unknown %d, failed %v, linearizable %s, replicas %v",
		victim.Name, r.Sold, taken, r.Unknown, r.FailedBy, r.Linearizability, r.Replicas)
	if n := rdb.Exists(ctx, c.State.LockKey).Val(); n != 0 {
		t.Errorf("the v3 lock key %s is left after the replica stopped", c.State.LockKey)
	}
	if int64(r.Sold) > taken || taken > int64(r.Sold+r.Unknown) {
		t.Errorf("sold %d, unknown %d, but the stock lost %d: a sale was lost", r.Sold, r.Unknown, taken)
	}
	if !r.Linearizable {
		t.Errorf("the requests are not linearizable: %s", r.Linearizability)
	}
	if r.Replicas[victim.Name] == 0 || r.Replicas[c.State.Replicas[1].Name] == 0 {
		t.Errorf("replies per replica %v: both should have served part of the run", r.Replicas)
	}
	log, err := os.ReadFile(victim.Log)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(log, []byte(`"msg":"stopped"`)) || bytes.Contains(log, []byte("stopped with an error")) {
		t.Errorf("%s did not stop cleanly; its log:\n%s", victim.Name, log)
	}
}
