package cluster

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sleeper starts a real process the way the cluster starts its own.
func sleeper(t *testing.T) *Proc {
	t.Helper()
	bin, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	p := &Proc{Name: "sleeper", Args: []string{bin, "30"}, Log: filepath.Join(t.TempDir(), "sleeper.log")}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(p.Pid, syscall.SIGKILL) })
	return p
}

// A pid is ours only while it runs the process we started: a state file
// whose pid now belongs to another process (the same pid, another start) is
// never signalled.
func TestIdentity(t *testing.T) {
	p := sleeper(t)
	if !p.alive() {
		t.Fatal("the process just started is not alive")
	}
	impostor := *p
	impostor.Started = "1" // as if the pid had been reused since
	if impostor.alive() {
		t.Fatal("a pid with another start time passes for ours")
	}
	if err := impostor.signal(syscall.SIGTERM); err == nil {
		t.Fatal("signalled a process that is not ours")
	}
	if ran, err := impostor.stop(time.Second); ran || err != nil {
		t.Fatalf("stop of a process not ours: ran %v, err %v; want nothing done", ran, err)
	}
	if !p.alive() {
		t.Fatal("the real process was hit")
	}
	if ran, err := p.stop(5 * time.Second); !ran || err != nil {
		t.Fatalf("stop: ran %v, err %v", ran, err)
	}
	if p.alive() {
		t.Fatal("alive after stop")
	}
}

// Freeze, resume and kill go through the identity check, by name.
func TestFreezeAndKill(t *testing.T) {
	p := sleeper(t)
	c := &Cluster{dir: t.TempDir(), State: State{Redis: []Proc{*p}}}
	state := func() byte {
		raw, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/stat")
		if err != nil {
			t.Skip("no /proc")
		}
		s := string(raw)
		return s[strings.LastIndexByte(s, ')')+2]
	}
	if err := c.Freeze("sleeper", true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the process stopped", func() bool { return state() == 'T' })
	if err := c.Freeze("sleeper", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the process running again", func() bool { return state() != 'T' })
	if _, err := c.Kill("nobody"); err == nil {
		t.Fatal("killed a process the cluster does not have")
	}
	if _, err := c.Kill("sleeper"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the process gone", func() bool { return !p.alive() })
}

func TestLoadNotUp(t *testing.T) {
	if _, err := Load(t.TempDir()); !errors.Is(err, ErrNotUp) {
		t.Fatalf("err = %v, want ErrNotUp", err)
	}
}

// The plan puts Redis where the service's defaults point, the replicas on
// the stock node, and nginx on loopback.
func TestPlan(t *testing.T) {
	s := Plan(Config{Dir: "/run/x", Port: 18000, Replicas: 3, Lock: "v6"})
	if len(s.Redis) != 3 || len(s.Etcd) != 3 || len(s.Replicas) != 3 || s.Nginx.Addr != "127.0.0.1:18000" || s.URL != "http://127.0.0.1:18000/sale" {
		t.Fatalf("plan %+v", s)
	}
	etcd := "-etcd " + s.Etcd[0].Addr + "," + s.Etcd[1].Addr + "," + s.Etcd[2].Addr
	for _, r := range s.Replicas {
		args := strings.Join(r.Args, " ")
		if !strings.Contains(args, "-redis "+s.StockNode().Addr) || !strings.Contains(args, "-lock v6") || !strings.Contains(args, etcd) ||
			!strings.HasPrefix(r.Addr, "127.0.0.1:") {
			t.Fatalf("replica %s: %s", r.Name, args)
		}
	}
	for _, m := range s.Etcd { // loopback only, data in the run directory
		args := strings.Join(m.Args, " ")
		if !strings.Contains(args, "--listen-client-urls http://"+m.Addr) || !strings.Contains(args, "--listen-peer-urls http://127.0.0.1:") ||
			!strings.Contains(args, "--data-dir /run/x/"+m.Name+".etcd") {
			t.Fatalf("etcd member %s: %s", m.Name, args)
		}
	}
}

// With the fault proxies, each replica reaches each node through its own
// proxy, every proxy's port is the toxiproxy process's to check and free,
// and the standby replicates through its proxy with the nodes' password
// (from their private file: see TestNoSecretOnCommandLine).
func TestPlanFaults(t *testing.T) {
	s := Plan(Config{Dir: "/run/x", Replicas: 2, Faults: true, RedisPassword: "pw"})
	if len(s.FaultProxies) != 1+2*3 || len(s.Toxiproxy.Extra) != len(s.FaultProxies) {
		t.Fatalf("proxies %+v, toxiproxy's addresses %v", s.FaultProxies, s.Toxiproxy.Extra)
	}
	if args := strings.Join(s.Replicas[0].Args, " "); !strings.Contains(args, "-redis 127.0.0.1:16101 -redlock 127.0.0.1:16101,127.0.0.1:16102,127.0.0.1:16103") {
		t.Fatalf("inventory-1: %s", args)
	}
	if args := strings.Join(s.Replicas[1].Args, " "); !strings.Contains(args, "-redis 127.0.0.1:16201 ") {
		t.Fatalf("inventory-2: %s", args)
	}
	if len(s.Standbys) != 1 || len(s.Sentinels) != 0 {
		t.Fatalf("standbys %v, sentinels %v: want one standby (the failover scenario's) and no sentinel", s.Standbys, s.Sentinels)
	}
	if args := strings.Join(s.Standbys[0].Args, " "); !strings.Contains(args, "--replicaof 127.0.0.1 16084") || s.Standbys[0].Args[1] != redisAuthConf("/run/x", 6384) {
		t.Fatalf("standby: %s", args)
	}
	if !slices.Contains(s.Addrs(), "127.0.0.1:16203") || !slices.Contains(s.Addrs(), "127.0.0.1:12380") {
		t.Fatalf("Addrs %v lacks a proxy's or an etcd peer's address", s.Addrs())
	}
}

// With Sentinel the stock's node has two standbys (each through its own
// proxy with the fault proxies, straight to the node without them) and
// three sentinels, and the replicas follow the primary the sentinels name.
func TestPlanSentinel(t *testing.T) {
	for _, faults := range []bool{false, true} {
		s := Plan(Config{Dir: "/run/x", Replicas: 2, Faults: faults, Sentinel: true})
		if len(s.Standbys) != 2 || len(s.Sentinels) != 3 {
			t.Fatalf("faults %v: standbys %v, sentinels %v; want 2 and 3", faults, s.Standbys, s.Sentinels)
		}
		from := []string{"6381", "6381"}
		if faults {
			from = []string{"16084", "16085"}
		}
		for i, sb := range s.Standbys {
			if args := strings.Join(sb.Args, " "); sb.Addr != "127.0.0.1:"+strconv.Itoa(6384+i) || !strings.HasSuffix(args, "--replicaof 127.0.0.1 "+from[i]) {
				t.Errorf("faults %v: standby %s: %s", faults, sb.Addr, args)
			}
			if faults && s.StandbyLink(sb.Name) != "127.0.0.1:"+from[i] {
				t.Errorf("standby %s's link %q", sb.Name, s.StandbyLink(sb.Name))
			}
		}
		if args := strings.Join(s.Replicas[1].Args, " "); !strings.Contains(args, "-sentinel 127.0.0.1:26380,127.0.0.1:26381,127.0.0.1:26382 -sentinel-master locklab") {
			t.Errorf("faults %v: inventory-2: %s", faults, args)
		}
		if args := s.Sentinels[2].Args; len(args) != 3 || args[1] != "/run/x/sentinel-26382.conf" || args[2] != "--sentinel" {
			t.Errorf("sentinel: %v", args)
		}
		if faults && (len(s.Toxiproxy.Extra) != len(s.FaultProxies) || !slices.Contains(s.Toxiproxy.Extra, "127.0.0.1:16085")) {
			t.Errorf("toxiproxy's addresses %v, proxies %v", s.Toxiproxy.Extra, s.FaultProxies)
		}
	}
}

// The rendered configuration is deploy/nginx.conf pointed at the local
// replicas and port, every rule kept, and nginx accepts it.
func TestRenderNginx(t *testing.T) {
	cfg := Config{Root: "../..", Dir: t.TempDir(), Port: 18099}.withDefaults()
	s := Plan(cfg)
	if err := renderNginx(cfg, s); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(cfg.Dir, "nginx", "nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	conf := string(raw)
	for _, want := range []string{"listen 127.0.0.1:18099;", "server " + s.Replicas[0].Addr + ";", "server " + s.Replicas[1].Addr + ";",
		"proxy_next_upstream off;", "pid " + filepath.Join(cfg.Dir, "nginx", "nginx.pid"),
		"location /replica/" + s.Replicas[1].Name + "/ {", "upstream replica-" + s.Replicas[0].Name + " {"} {
		if !strings.Contains(conf, want) {
			t.Errorf("rendered nginx.conf lacks %q", want)
		}
	}
	for _, compose := range []string{"resolver 127.0.0.11", "inventory:8080", "$replica:8080", "lab:8070", "listen 80;"} {
		if strings.Contains(conf, compose) {
			t.Errorf("rendered nginx.conf keeps Compose's %q", compose)
		}
	}
	if !executable(s.Nginx.Args[0]) {
		t.Skip("nginx not installed: the configuration is not checked by nginx itself")
	}
	if err := checkNginx(context.Background(), s.Nginx); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Clean removes what up creates and nothing else: a run directory pointed at
// a folder of the user's keeps the user's files (and the folder).
func TestClean(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir}
	s := Plan(cfg)
	ours := []string{stateFile(dir), s.Replicas[0].Args[0], s.Redis[0].Log, s.Replicas[1].Log, s.Nginx.Log,
		filepath.Join(dir, "nginx", "nginx.conf"), filepath.Join(dir, "inventory-3.log")}
	ours = append(ours, filepath.Join(etcdData(dir, s.Etcd[0].Name), "member", "wal", "0.wal"), s.Etcd[1].Log,
		filepath.Join(dir, "appendonlydir", "appendonly.aof.1.incr.aof"), filepath.Join(dir, "appendonlydir", "appendonly.aof.manifest"))
	theirs := []string{filepath.Join(dir, "notes.txt"), filepath.Join(dir, "bin", "mytool"),
		filepath.Join(etcdData(dir, s.Etcd[2].Name), "mine.txt")} // not etcd's layout: left alone
	for _, f := range append(ours, theirs...) {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "nginx", "tmp", "proxy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Clean(cfg); err == nil || !strings.Contains(err.Error(), "not an etcd data directory") {
		t.Fatalf("Clean: %v, want the user's folder named and left alone", err)
	}
	for _, f := range ours {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s is left (err %v)", f, err)
		}
	}
	for _, f := range theirs {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("the user's %s was removed: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "nginx")); !os.IsNotExist(err) {
		t.Error("the emptied nginx directory is left")
	}
}

func TestProcAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0100007F:1F90":                         "127.0.0.1:8080",
		"00000000:0050":                         "0.0.0.0:80",
		"00000000000000000000000001000000:1F91": "[::1]:8081",
		"0000000000000000FFFF00000100007F:0050": "127.0.0.1:80",
	} {
		got, err := procAddr(in)
		if err != nil || got.String() != want {
			t.Errorf("procAddr(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	if _, err := procAddr("zz:1"); err == nil {
		t.Error("procAddr of garbage: no error")
	}
}
