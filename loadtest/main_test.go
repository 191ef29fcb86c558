package main

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/locklab/locklab/internal/loadtest"
	"github.com/locklab/locklab/internal/servicetest"
)

func TestExitStatus(t *testing.T) {
	closed := closedURL(t)
	for name, tc := range map[string]struct {
		args   []string
		status int
		says   string
	}{
		"unknown lock": {[]string{"-lock", "v9"}, 2, "none v1 v2"},
		"bad n":        {[]string{"-n", "0"}, 2, "-n"},
		"help":         {[]string{"-h"}, 0, "-expect-safe"},
		"unreachable":  {[]string{"-url", closed, "-lock", "v6", "-n", "1"}, 1, "v6"},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := run(context.Background(), tc.args, noEnv, &stdout, &stderr); got != tc.status {
				t.Fatalf("exit %d, want %d\n%s", got, tc.status, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.says) {
				t.Fatalf("stderr lacks %q:\n%s", tc.says, stderr.String())
			}
		})
	}
}

func TestParseLocksKeepsTutorialOrder(t *testing.T) {
	got, err := parseLocks("redlock, v1,none")
	if err != nil || strings.Join(got, ",") != "none,v1,redlock" {
		t.Fatalf("got %v, %v", got, err)
	}
}

// -wait takes one wait, a list or all, in versions.Waits' order; each
// version that waits as -wait says runs once per wait, the others once.
func TestWaitsAndRuns(t *testing.T) {
	for in, want := range map[string]string{"": "", "all": "poll,notify,handoff", "handoff, poll": "poll,handoff"} {
		got, err := parseWaits(in)
		if err != nil || strings.Join(got, ",") != want {
			t.Errorf("parseWaits(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	if _, err := parseWaits("poll,sometimes"); err == nil {
		t.Error(`parseWaits accepted "sometimes"`)
	}
	waits, _ := parseWaits("all")
	var runs []string
	for _, r := range (options{locks: []string{"v2", "v6", "redlock"}, waits: waits}).runs() {
		runs = append(runs, strings.TrimSpace(r.lock+" "+r.cfg.Wait))
	}
	if got := strings.Join(runs, ","); got != "v2,v6 poll,v6 notify,v6 handoff,redlock" {
		t.Fatalf("runs %s", got)
	}
}

// -expect-safe fails for an oversell only for versions expected to be safe,
// and for any run that tested too little.
func TestNotShownSafe(t *testing.T) {
	got := notShownSafe([]loadtest.Result{{Lock: "none", Oversold: 9}, {Lock: "v2", Oversold: 3}, {Lock: "v6", Oversold: 0}, {Lock: "v4", Oversold: 2},
		{Lock: "atomic", TooLittle: "sold nothing"}})
	if len(got) != 2 || !strings.HasPrefix(got[0], "v4 oversold") || got[1] != "atomic tested too little: sold nothing" {
		t.Fatalf("got %v, want v4 and atomic", got)
	}
}

func noEnv(string) string { return "" }

// closedURL is a /sale URL on a port nothing listens on: a run that starts
// fails to reach it (exit 1).
func closedURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "http://127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port) + "/sale"
}

// The admin token and the Redis password come from the service's variables
// when no flag gives them (the flag wins), so that our own tooling never puts
// them on a command line.
func TestSecretsFromEnvironment(t *testing.T) {
	env := map[string]string{"INVENTORY_ADMIN_TOKEN": "from-env", "INVENTORY_REDIS_PASSWORD": "pw-env"}
	for name, tc := range map[string]struct {
		args            []string
		getenv          func(string) string
		token, password string
	}{
		"environment": {nil, func(k string) string { return env[k] }, "from-env", "pw-env"},
		"flags win":   {[]string{"-admin-token", "flag", "-redis-password", "pw-flag"}, func(k string) string { return env[k] }, "flag", "pw-flag"},
		"neither":     {nil, noEnv, "", ""}, // -compose: the stack's own
	} {
		t.Run(name, func(t *testing.T) {
			o, err := parse(tc.args, tc.getenv, new(bytes.Buffer))
			if err != nil {
				t.Fatal(err)
			}
			if o.cfg.AdminToken != tc.token || o.redisPass != tc.password {
				t.Fatalf("token %q, password %q; want %q, %q", o.cfg.AdminToken, o.redisPass, tc.token, tc.password)
			}
		})
	}
	// -fence needs the token, except on the local cluster's nemesis, which
	// takes the cluster's own from its state file.
	if _, err := parse([]string{"-fence"}, noEnv, new(bytes.Buffer)); err == nil {
		t.Error("-fence with no token anywhere: accepted")
	}
	if _, err := parse([]string{"-fence", "-nemesis", "-duration", "1s", "-lock", "v6"}, noEnv, new(bytes.Buffer)); err != nil {
		t.Errorf("-fence -nemesis on the local cluster: %v", err)
	}
}

// A stack whose replicas have no database and no ZooKeeper (the Compose
// stack, so far): db or zk asked for by name is refused, saying why; in all
// they are left out, saying so, and every other version runs.
func TestNoDatabase(t *testing.T) {
	url := servicetest.Start(t, "inventory-1") + "/sale"
	var stdout, stderr bytes.Buffer
	if got := run(context.Background(), []string{"-url", url, "-lock", "v1,db", "-n", "2"}, noEnv, &stdout, &stderr); got != 1 ||
		!strings.Contains(stderr.String(), "the replicas have no database") {
		t.Fatalf("-lock v1,db: exit %d, want 1 saying why\n%s", got, stderr.String())
	}
	stderr.Reset()
	if got := run(context.Background(), []string{"-url", url, "-lock", "zk", "-n", "2"}, noEnv, &stdout, &stderr); got != 1 ||
		!strings.Contains(stderr.String(), "the replicas have no ZooKeeper ensemble (-zk)") {
		t.Fatalf("-lock zk: exit %d, want 1 saying why\n%s", got, stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if got := run(context.Background(), []string{"-url", url, "-lock", "all", "-n", "2", "-stock", "1", "-json"}, noEnv, &stdout, &stderr); got != 0 {
		t.Fatalf("-lock all: exit %d\n%s", got, stderr.String())
	}
	if !strings.Contains(stderr.String(), "left out zk, db-seed, db") || strings.Contains(stdout.String(), `"lock":"db`) ||
		strings.Contains(stdout.String(), `"lock":"zk"`) || !strings.Contains(stdout.String(), `"lock":"atomic"`) {
		t.Fatalf("-lock all on a stack with no database: stderr %q, stdout\n%s", stderr.String(), stdout.String())
	}
}

// What cannot mean anything is refused before any load (exit 2, saying
// why; the URL is closed, so a run that started would exit 1): fencing a
// version that hands out no token, a selection of scenarios and versions
// that runs no cell, a flag the mode would ignore, nothing to sell with
// -expect-safe. The old load test ran each of these (and passed the first,
// the scenarios and the -stock 0 on a cluster).
func TestRefusedBeforeAnyLoad(t *testing.T) {
	closed := closedURL(t)
	for name, tc := range map[string]struct {
		args []string
		says string
	}{
		"fence atomic":          {[]string{"-lock", "atomic", "-fence", "-expect-safe", "-admin-token", "t"}, "-fence: atomic hands out no fencing token"},
		"fence a library":       {[]string{"-lock", "v6,redislock", "-fence", "-admin-token", "t"}, "-fence: redislock hands out no fencing token"},
		"fence all":             {[]string{"-lock", "all", "-fence", "-admin-token", "t"}, "the versions that fence: v3 v4 v5 v6 v7 v8 redlock etcd zk db"},
		"scenario, no version":  {[]string{"-scenario", "slow-holder", "-lock", "v1,v2,v3,atomic"}, "runs no cell: it applies only to v4 v5 v6 v7 v8 etcd zk db db-getlock redislock"},
		"scenario, other":       {[]string{"-scenario", "lost-lease", "-lock", "v6"}, "-scenario lost-lease with -lock v6 runs no cell"},
		"scenario, fence, wait": {[]string{"-scenario", "slow-holder", "-lock", "v6", "-fence", "-wait", "handoff"}, "-fence -wait: not used by the scenarios"},
		"scenario, expect-safe": {[]string{"-scenario", "slow-holder", "-lock", "v6", "-expect-safe", "-n", "5"}, "-expect-safe -n: not used by the scenarios"},
		"stock 0, expect-safe":  {[]string{"-lock", "v6", "-stock", "0", "-expect-safe"}, "-stock 0 with -expect-safe"},
		"plain with a lock":     {[]string{"-plain", "-lock", "v6", "-stock", "5"}, "-lock -stock: not used by the -plain run"},
		"load test with -doc":   {[]string{"-lock", "v6", "-doc", "x.md"}, "-doc: not used by the load test"},
		"load test with -seed":  {[]string{"-lock", "v6", "-seed", "3"}, "-seed: not used by the load test"},
		"load test, mutate":     {[]string{"-lock", "v6", "-mutate"}, "-mutate: not used by the load test"},
		"mutate, nothing held":  {[]string{"-scenario", "slow-holder", "-lock", "v6", "-mutate"}, "has no cell expected to hold"},
		"mutate with -out":      {[]string{"-scenario", "slow-holder", "-lock", "v8", "-mutate", "-out", "x.html"}, "-out with -mutate"},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := run(context.Background(), append([]string{"-url", closed}, tc.args...), noEnv, &stdout, &stderr); got != 2 {
				t.Fatalf("exit %d, want 2 (refused before any load)\n%s", got, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.says) {
				t.Fatalf("stderr lacks %q:\n%s", tc.says, stderr.String())
			}
		})
	}
	// What each mode does use still parses.
	for _, args := range [][]string{
		{"-lock", "v6,etcd", "-fence", "-admin-token", "t", "-stock", "5", "-expect-safe", "-wait", "handoff"},
		{"-scenario", "slow-holder", "-lock", "v6,v1", "-doc", "x.md", "-json"},
		{"-scenario", "all", "-lock", "v6"},
		{"-plain", "-n", "5", "-c", "2"},
		{"-lock", "v6", "-stock", "0"},
	} {
		if _, err := parse(args, noEnv, new(bytes.Buffer)); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// A version whose every sale failed (etcd on a replica with no etcd: 503
// each) oversold nothing; the old -expect-safe passed it, exit 0. It sold
// nothing, so it showed nothing: the table marks it and -expect-safe fails.
func TestExpectSafeFailsARunThatSoldNothing(t *testing.T) {
	url := servicetest.Start(t, "inventory-1") + "/sale"
	var stdout, stderr bytes.Buffer
	if got := run(context.Background(), []string{"-url", url, "-lock", "etcd,v6", "-n", "20", "-c", "4", "-stock", "10", "-expect-safe"}, noEnv, &stdout, &stderr); got != 1 ||
		!strings.Contains(stderr.String(), "-expect-safe: etcd tested too little: sold nothing") || strings.Contains(stderr.String(), "v6 tested") {
		t.Fatalf("exit %d, want 1 for etcd alone\n%s", got, stderr.String())
	}
	if !strings.Contains(stdout.String(), "etcd (TESTED TOO LITTLE: sold nothing)") || !strings.Contains(stdout.String(), "not tested") ||
		!strings.Contains(stdout.String(), "not served") {
		t.Fatalf("the table does not mark etcd's row:\n%s", stdout.String())
	}
}
