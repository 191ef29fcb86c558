package cluster

import (
	"context"
	"crypto/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/locklab/locklab/internal/redisconn"
	"github.com/locklab/locklab/internal/redistest"
)

// No secret on a command line, which every user of the machine reads (ps,
// /proc/PID/cmdline). The stock's node and the standby of a cluster with a
// password and an admin token start, for real, from their planned arguments
// (moved to free ports, and the standby to that node); what the kernel shows
// as their command lines holds neither secret, yet the node refuses a client
// without the password and serves one with it, and the standby replicates
// from it with the password. redis-server rewrites its title once it runs,
// hiding its arguments: the nodes run with set-proc-title no, so /proc shows
// for as long as they run what ps showed until that rewrite. Every other
// planned command line holds neither secret either; the replicas get both
// through their environment.
func TestNoSecretOnCommandLine(t *testing.T) {
	if !executable(lookPath("redis-server")) {
		t.Skip("no redis-server")
	}
	password := `a "quoted" \ pass word, ü ` + rand.Text() // and Redis' quoting works
	token := rand.Text()
	dir := t.TempDir()
	s := Plan(Config{Dir: dir, Faults: true, Sentinel: true, RedisPassword: password, AdminToken: token})
	if err := writeSecrets(dir, password, token, []int{6381, 6384}); err != nil {
		t.Fatal(err)
	}
	secret := func(what string, s string) {
		t.Helper()
		if strings.Contains(s, password) || strings.Contains(s, token) {
			t.Errorf("%s holds a secret: %q", what, s)
		}
	}
	for _, p := range s.procs() {
		secret(p.Name+"'s planned command line", strings.Join(p.Args, " "))
	}
	for _, r := range s.Replicas {
		if !slices.Contains(r.Env, passwordEnv+"="+password) || !slices.Contains(r.Env, tokenEnv+"="+token) {
			t.Errorf("%s's environment lacks the password or the token", r.Name)
		}
	}

	primary, standby := s.Redis[0], s.Standbys[0]
	primary.Env = nil // no clock shim: it is not built here
	start := func(p *Proc, extra ...string) string {
		t.Helper()
		addr := "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
		if err := p.start(append([]string{"--port", strconv.Itoa(portOf(addr)), "--set-proc-title", "no"}, extra...)...); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(p.Pid, syscall.SIGKILL) })
		return addr
	}
	primaryAddr := start(&primary, "--repl-diskless-sync-delay", "0") // the standby's first sync at once
	standbyAddr := start(&standby, "--replicaof", "127.0.0.1", strconv.Itoa(portOf(primaryAddr)))

	ctx := context.Background()
	for _, addr := range []string{primaryAddr, standbyAddr} {
		rdb := redisconn.New(addr, password)
		defer rdb.Close()
		waitFor(t, addr+" answering with the password", func() bool { return listening(addr) && rdb.Ping(ctx).Err() == nil })
		anon := redisconn.New(addr, "")
		defer anon.Close()
		if err := anon.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
			t.Errorf("%s without the password: %v, want NOAUTH", addr, err)
		}
	}
	rdb := redisconn.New(standbyAddr, password)
	defer rdb.Close()
	waitFor(t, "the standby linked to its primary", func() bool {
		return strings.Contains(rdb.Info(ctx, "replication").Val(), "master_link_status:up")
	})
	for _, p := range []Proc{primary, standby} {
		raw, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/cmdline")
		if err != nil {
			t.Skip("no /proc: ", err)
		}
		cmdline := strings.ReplaceAll(string(raw), "\x00", " ")
		if !strings.Contains(cmdline, "--set-proc-title no") {
			t.Fatalf("%s rewrote its command line: %q", p.Name, cmdline)
		}
		secret(p.Name+"'s /proc/"+strconv.Itoa(p.Pid)+"/cmdline", cmdline)
	}
}
