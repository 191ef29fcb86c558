package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/etcdtest"
	"github.com/locklab/locklab/internal/locks/handoff"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// build compiles the command once per test binary run.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "inventory")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// setup starts a Redis holding stock units and picks the service's port.
func setup(t *testing.T, stock int) (*redistest.Server, *redis.Client, int, string) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client()
	if err := rdb.Set(context.Background(), api.DefaultStockKey, stock, 0).Err(); err != nil {
		t.Fatal(err)
	}
	port := redistest.FreePort(t)
	return srv, rdb, port, "http://127.0.0.1:" + strconv.Itoa(port)
}

func waitHealthy(t *testing.T, base string) {
	t.Helper()
	locktest.WaitFor(t, 10*time.Second, "the service to answer /healthz", func() bool {
		res, err := http.Get(base + "/healthz")
		if err == nil {
			res.Body.Close()
		}
		return err == nil && res.StatusCode == 200
	})
}

// call sends one request with no body and returns the status and body.
func call(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	return res.StatusCode, b.String()
}

// process is the service's binary running for a test.
type process struct {
	cmd     *exec.Cmd
	logs    *bytes.Buffer // its log, shown if the test fails
	exited  chan struct{} // closed once it has exited; waitErr is then set
	waitErr error
}

// startProcess starts bin with args until the test ends.
func startProcess(t *testing.T, bin string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, args...), logs: &bytes.Buffer{}, exited: make(chan struct{})}
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.waitErr = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("service log:\n%s", p.logs.String())
		}
	})
	return p
}

// The real binary: it serves, and on SIGTERM it finishes the sale in flight,
// releases that sale's lock and exits 0.
func TestProcessStopsCleanly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv, rdb, port, base := setup(t, 3)
	ctx := context.Background()
	bin := build(t)
	p := startProcess(t, bin, "-port", strconv.Itoa(port), "-redis", srv.Addr, "-lock", "v6", "-work", "300ms", "-name", "proc-test")
	cmd, exited := p.cmd, p.exited
	waitHealthy(t, base)

	// The container healthcheck: the binary probing its own /readyz.
	if out, err := exec.Command(bin, "-probe", base+"/readyz").CombinedOutput(); err != nil {
		t.Fatalf("-probe of a ready service: %v\n%s", err, out)
	}

	type saleReply struct {
		Sold      bool   `json:"sold"`
		Remaining int    `json:"remaining"`
		Replica   string `json:"replica"`
	}
	replies := make(chan saleReply, 1)
	go func() {
		var r saleReply
		res, err := http.Post(base+"/sale", "", nil)
		if err == nil {
			_ = json.NewDecoder(res.Body).Decode(&r)
			res.Body.Close()
		}
		replies <- r
	}()
	// The sale is in flight once its lock exists.
	locktest.WaitFor(t, 10*time.Second, "the sale to take its lock", func() bool {
		return rdb.Exists(ctx, api.DefaultLockKey).Val() == 1
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	if r := <-replies; !r.Sold || r.Remaining != 2 || r.Replica != "proc-test" {
		t.Fatalf("in-flight sale during shutdown: %+v, want sold with 2 left", r)
	}
	select {
	case <-exited:
		if p.waitErr != nil {
			t.Fatalf("exit: %v, want status 0", p.waitErr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("did not exit within 20s of SIGTERM")
	}
	if rdb.Exists(ctx, api.DefaultLockKey).Val() != 0 {
		t.Fatal("lock left behind after shutdown")
	}
	if _, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
		t.Fatal("port still open after exit")
	}
}

// SIGTERM while sales hold and wait for v3's lock (no expiry) with a
// business time far past the grace period: the waiters give up, the
// holder's connection is closed at the grace period, but the holder still
// writes and releases over an open Redis client before the process exits.
// Nothing is left locked (v3's lock would stay forever), the queue is empty
// or expiring, and no reply said sold for a unit the stock did not lose.
func TestStopPastTheGracePeriod(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const stock, sales = 10, 4
	srv, rdb, port, base := setup(t, stock)
	ctx := context.Background()
	p := startProcess(t, build(t), "-port", strconv.Itoa(port), "-redis", srv.Addr, "-lock", "v3", "-wait", "handoff",
		"-work", "2s", "-grace", "200ms", "-name", "grace-test")
	cmd, exited := p.cmd, p.exited
	waitHealthy(t, base)

	type outcome struct {
		status int
		err    error
	}
	replies := make(chan outcome, sales)
	client := &http.Client{Timeout: 30 * time.Second}
	for range sales {
		go func() {
			res, err := client.Post(base+"/sale", "", nil)
			if err != nil {
				replies <- outcome{err: err}
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			replies <- outcome{status: res.StatusCode}
		}()
	}
	keys := handoff.For(api.DefaultLockKey)
	locktest.WaitFor(t, 10*time.Second, "one sale holding the lock and the others queued", func() bool {
		return rdb.Exists(ctx, keys.Lock).Val() == 1 && rdb.ZCard(ctx, keys.Queue).Val() == sales-1
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		t.Fatal("did not exit within 20s of SIGTERM")
	}
	if !strings.Contains(p.logs.String(), "grace period over") {
		t.Fatalf("the holder finished within the 200ms grace period: the test did not reach past it")
	}
	if p.waitErr != nil {
		t.Errorf("exit: %v, want status 0", p.waitErr)
	}
	for _, k := range []string{keys.Lock, keys.Queue, keys.Deadlines, keys.Granted} {
		if ttl := rdb.PTTL(ctx, k).Val(); ttl == -1 {
			t.Errorf("%s left with no expiry after the replica stopped", k)
		}
	}
	sold, unanswered := 0, 0
	for range sales {
		switch o := <-replies; {
		case o.err != nil:
			unanswered++
		case o.status == http.StatusOK:
			sold++
		}
	}
	left, err := rdb.Get(ctx, api.DefaultStockKey).Int()
	if err != nil {
		t.Fatal(err)
	}
	taken := stock - left
	t.Logf("sold %d, unanswered %d, the stock lost %d", sold, unanswered, taken)
	if sold > taken || taken > sold+unanswered {
		t.Fatalf("sold %d, unanswered %d, but the stock lost %d", sold, unanswered, taken)
	}
}

// The real binary with -lock-override: /sale?wait= picks the wait, and
// /metrics counts each sale by outcome, each acquisition by version, wait
// and attempts, and each hold of the lock. With -pprof the profiler answers
// on its own address, and never on the service's.
func TestProcessWaitAndMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv, _, port, base := setup(t, 1)
	pprof := "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
	etcd := strings.TrimPrefix(etcdtest.Start(t, 1).Members[0].ClientURL, "http://")
	cmd := exec.Command(build(t), "-port", strconv.Itoa(port), "-redis", srv.Addr, "-lock", "v6", "-lock-override", "-name", "metrics-test",
		"-pprof", pprof, "-etcd", etcd)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("service log:\n%s", logs.String())
		}
	})
	waitHealthy(t, base)
	get := func(path string) (int, string) {
		t.Helper()
		if path == "/metrics" {
			return call(t, http.MethodGet, base+path)
		}
		return call(t, http.MethodPost, base+path)
	}
	for _, c := range []struct {
		path   string
		status int
	}{
		{"/sale?lock=v8&wait=notify", 200},
		{"/sale?lock=v6&wait=poll", 409},
		{"/sale?lock=v7&wait=handoff", 409},
		{"/sale?lock=etcd", 409},
		{"/sale?wait=sometimes", 400},
	} {
		if status, body := get(c.path); status != c.status {
			t.Fatalf("POST %s: %d %s, want %d", c.path, status, body, c.status)
		}
	}
	status, body := get("/metrics")
	if status != 200 {
		t.Fatalf("/metrics: %d", status)
	}
	for _, want := range []string{
		`locklab_sales_total{lock="v8",outcome="sold",wait="notify"} 1`,
		`locklab_sales_total{lock="v6",outcome="sold_out",wait="poll"} 1`,
		`locklab_lock_acquire_seconds_count{lock="v8",result="obtained",wait="notify"} 2`, // v8 nests
		`locklab_lock_acquire_attempts_count{lock="v6",wait="poll"} 1`,
		`locklab_lock_hold_seconds_count{lock="v8",wait="notify"} 1`, // one hold, however nested
		`locklab_lock_hold_seconds_count{lock="v6",wait="poll"} 1`,   // sold out, but it held the lock to find out
		`locklab_lock_hold_seconds_count{lock="v7",wait="handoff"} 1`,
		`locklab_lock_acquire_attempts_sum{lock="v7",wait="handoff"} 2`, // one attempt each, outer and nested
		`locklab_lock_acquire_attempts_sum{lock="etcd",wait="watch"} 1`, // the mutex waits by itself
		`locklab_lock_hold_seconds_count{lock="etcd",wait="watch"} 1`,
		`locklab_redis_round_trips_total{node="`,
		`locklab_watchdog_renewals_total 0`,
		`locklab_watchdog_lost_leases_total 0`,
		`process_resident_memory_bytes`,
	} {
		if !bytes.Contains([]byte(body), []byte(want)) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
	for _, c := range []struct {
		url    string
		status int
	}{
		{"http://" + pprof + "/debug/pprof/cmdline", 200},
		{base + "/debug/pprof/cmdline", 404},
	} {
		res, err := http.Get(c.url)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.status {
			t.Errorf("GET %s: %d, want %d", c.url, res.StatusCode, c.status)
		}
	}
}

// With -sentinel the binary sells on the primary Redis Sentinel names, and
// after the primary is killed and Sentinel has promoted its replica, on the
// promoted replica: the stock and the lock follow the failover with no
// restart (the unit sold before it was replicated first, so no sale is
// lost here; the failover scenarios show what an unreplicated one costs).
func TestProcessFollowsSentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const master = "locklab"
	primary, rdb, port, base := setup(t, 10)
	replica := redistest.StartReplica(t, primary)
	sentinels := redistest.StartSentinels(t, primary, master, 1)
	p := startProcess(t, build(t), "-port", strconv.Itoa(port), "-sentinel", strings.Join(sentinels, ","),
		"-sentinel-master", master, "-redis", "127.0.0.1:1", "-lock", "v6", "-name", "sentinel-test")
	waitHealthy(t, base)
	sell := func() (int, string) { return call(t, http.MethodPost, base+"/sale") }
	if status, body := sell(); status != 200 {
		t.Fatalf("a sale before the failover: %d %s", status, body)
	}
	ctx := context.Background()
	if n, err := rdb.Get(ctx, api.DefaultStockKey).Int(); err != nil || n != 9 {
		t.Fatalf("the primary's stock: %d (%v), want 9", n, err)
	}
	locktest.WaitFor(t, 10*time.Second, "the replica to have the sale", func() bool {
		n, err := replica.Client().Get(ctx, api.DefaultStockKey).Int()
		return err == nil && n == 9
	})

	primary.Stop() // a crash: SIGKILL
	redistest.WaitPromoted(t, sentinels[0], master, replica)
	// Until the replica's client learns the new primary, a sale answers a
	// clean 503 (nothing sold); then it sells there.
	var status int
	var body string
	locktest.WaitFor(t, 15*time.Second, "a sale on the promoted replica", func() bool {
		status, body = sell()
		if status != 200 && status != 503 {
			t.Fatalf("a sale during the failover: %d %s, want 200 or a clean 503", status, body)
		}
		return status == 200
	})
	if n, err := replica.Client().Get(ctx, api.DefaultStockKey).Int(); err != nil || n != 8 {
		t.Fatalf("the promoted replica's stock: %d (%v), want 8: %s", n, err, body)
	}
	select {
	case <-p.exited:
		t.Fatalf("the service exited: %v", p.waitErr)
	default:
	}
}
