package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
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

// The real binary: it serves, and on SIGTERM it finishes the sale in flight,
// releases that sale's lock and exits 0.
func TestProcessStopsCleanly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	if err := rdb.Set(ctx, "inventory:001", 3, 0).Err(); err != nil {
		t.Fatal(err)
	}
	port := redistest.FreePort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	bin := build(t)
	cmd := exec.Command(bin, "-port", strconv.Itoa(port), "-redis", srv.Addr, "-lock", "v6", "-work", "300ms", "-name", "proc-test")
	var logs bytes.Buffer // the service's log, shown if the test fails
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{}) // closed once the process has exited; waitErr is then set
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("service log:\n%s", logs.String())
		}
	})

	locktest.WaitFor(t, 10*time.Second, "the service to answer /healthz", func() bool {
		res, err := http.Get(base + "/healthz")
		if err == nil {
			res.Body.Close()
		}
		return err == nil && res.StatusCode == 200
	})

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
		return rdb.Exists(ctx, "inventoryRedisLock").Val() == 1
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	if r := <-replies; !r.Sold || r.Remaining != 2 || r.Replica != "proc-test" {
		t.Fatalf("in-flight sale during shutdown: %+v, want sold with 2 left", r)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("exit: %v, want status 0", waitErr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("did not exit within 20s of SIGTERM")
	}
	if rdb.Exists(ctx, "inventoryRedisLock").Val() != 0 {
		t.Fatal("lock left behind after shutdown")
	}
	if _, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
		t.Fatal("port still open after exit")
	}
}
