package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/redisconn"
)

// LabPort is the lab's port on loopback; nginx routes / and /lab/ to it.
const LabPort = 8070

// ErrAlreadyUp means every process of the cluster in that run directory
// runs: Up started nothing and returned the running cluster.
var ErrAlreadyUp = errors.New("cluster: already up")

// Up starts the cluster cfg describes and returns it. With the cluster
// already up in cfg.Dir it starts nothing and returns it with ErrAlreadyUp;
// partly up is an error. A port already in use is an error naming it, and
// nothing is started; a start that fails stops whatever was started.
func Up(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg = cfg.withDefaults()
	if err := prepareRunDir(cfg.Dir); err != nil {
		return nil, err
	}
	if c, err := Load(cfg.Dir); err == nil {
		switch running, all := c.Running(); {
		case running == all:
			return c, ErrAlreadyUp
		case running > 0:
			return nil, fmt.Errorf("cluster: partly up (%d of %d processes running): run make down first", running, all)
		}
	}
	if cfg.Replicas < 1 || cfg.Port < 1 || cfg.Port > 65535 {
		return nil, fmt.Errorf("cluster: want REPLICAS >= 1 and PORT 1-65535, got %d and %d", cfg.Replicas, cfg.Port)
	}
	if err := ensureTools(cfg.Log, cfg.Faults); err != nil {
		return nil, err
	}
	c := &Cluster{dir: cfg.Dir, State: Plan(cfg)}
	for _, p := range c.State.procs() {
		for _, a := range append([]string{p.Addr}, p.Extra...) {
			if listening(a) {
				return nil, fmt.Errorf("cluster: port %d is already in use (needed for %s); free it%s", portOf(a), p.Name, portHint(p))
			}
		}
	}
	if err := c.start(ctx, cfg); err != nil {
		_, _ = c.Down()
		return nil, fmt.Errorf("%w (stopped what was started)", err)
	}
	return c, nil
}

func portHint(p *Proc) string {
	if p.Name == "nginx" {
		return " or choose another: PORT=8000 make up"
	}
	return " and try again"
}

// Plan lays out every process Up would start for cfg: names, addresses,
// command lines, logs (no pids: nothing is started).
func Plan(cfg Config) State {
	cfg = cfg.withDefaults()
	s := State{Port: cfg.Port, URL: fmt.Sprintf("http://127.0.0.1:%d/sale", cfg.Port), RedisPassword: cfg.RedisPassword,
		AdminToken: cfg.AdminToken}
	for _, port := range redisPorts() {
		name, addr := "redis-"+strconv.Itoa(port), "127.0.0.1:"+strconv.Itoa(port)
		args := redisArgs(lookPath("redis-server"), port, cfg.Dir, cfg.RedisPassword != "")
		s.Redis = append(s.Redis, Proc{Name: name, Addr: addr, Args: args, Log: filepath.Join(cfg.Dir, name+".log")})
	}
	s.Etcd = planEtcd(cfg.Dir)
	s.ZK = planZK(cfg.Dir)
	s.DB = planDB(cfg.Dir)
	var etcd, zk []string
	for _, m := range s.Etcd {
		etcd = append(etcd, m.Addr)
	}
	for _, m := range s.ZK {
		zk = append(zk, m.Addr)
	}
	names := make([]string, cfg.Replicas)
	for i := range names {
		names[i] = "inventory-" + strconv.Itoa(i+1)
	}
	if cfg.Faults { // the replicas reach every node through their own proxy
		planFaults(cfg.Dir, &s, names)
	}
	switch {
	case cfg.Sentinel:
		planStandbys(cfg.Dir, &s, 2, cfg.RedisPassword != "")
		planSentinel(cfg.Dir, &s)
	case cfg.Faults: // the failover scenario's, promoted by hand
		planStandbys(cfg.Dir, &s, 1, cfg.RedisPassword != "")
	}
	bin := filepath.Join(cfg.Dir, "bin", "inventory")
	for i, name := range names {
		port, nodes := api.DefaultPort+i, s.nodeAddrs(name)
		args := []string{bin, "-bind", "127.0.0.1", "-port", strconv.Itoa(port), "-name", name, "-lock", cfg.Lock, "-lock-override",
			"-work", cfg.Work, "-redis", nodes[0], "-redlock", strings.Join(nodes, ","), "-etcd", strings.Join(etcd, ","),
			"-zk", strings.Join(zk, ",")}
		if cfg.Sentinel { // the stock and the single-node locks: the primary the sentinels name
			args = append(args, "-sentinel", strings.Join(s.SentinelAddrs(), ","), "-sentinel-master", SentinelMaster)
		}
		if cfg.Pprof {
			args = append(args, "-pprof", "127.0.0.1:"+strconv.Itoa(6060+i)) // i counts from 0
		}
		env := append([]string{"GOMAXPROCS=" + gomaxprocs(cfg.Replicas)}, serviceEnv(os.Environ())...)
		// The secrets are cfg's, whatever the environment says.
		env = slices.DeleteFunc(env, func(kv string) bool {
			return strings.HasPrefix(kv, passwordEnv+"=") || strings.HasPrefix(kv, tokenEnv+"=") || strings.HasPrefix(kv, dbEnv+"=")
		})
		if cfg.RedisPassword != "" {
			env = append(env, passwordEnv+"="+cfg.RedisPassword)
		}
		if cfg.AdminToken != "" {
			env = append(env, tokenEnv+"="+cfg.AdminToken)
		}
		env = append(env, dbEnv+"="+s.DSN()) // its password too: never on a command line
		s.Replicas = append(s.Replicas, Proc{Name: name, Addr: "127.0.0.1:" + strconv.Itoa(port), Args: args, Env: env,
			Log: filepath.Join(cfg.Dir, name+".log")})
	}
	var redisAddrs []string
	for _, n := range s.Redis {
		redisAddrs = append(redisAddrs, n.Addr)
	}
	labEnv := []string{}
	if cfg.AdminToken != "" {
		labEnv = append(labEnv, "LAB_ADMIN_TOKEN="+cfg.AdminToken)
	}
	s.Lab = &Proc{Name: "lab", Addr: "127.0.0.1:" + strconv.Itoa(LabPort), Env: labEnv, Log: filepath.Join(cfg.Dir, "lab.log"),
		Args: []string{filepath.Join(cfg.Dir, "bin", "lab"), "-listen", "127.0.0.1:" + strconv.Itoa(LabPort), "-url", s.URL,
			"-replicas", strings.Join(names, ","), "-redis", strings.Join(redisAddrs, ","), "-etcd", strings.Join(etcd, ","), "-zk", strings.Join(zk, ","), "-db", s.DB.Addr,
			"-run-dir", cfg.Dir}}
	nd := nginxDir(cfg.Dir)
	s.Nginx = Proc{Name: "nginx", Addr: "127.0.0.1:" + strconv.Itoa(cfg.Port), Log: filepath.Join(nd, "error.log"),
		Args: []string{lookPath("nginx"), "-p", nd, "-c", filepath.Join(nd, "nginx.conf"),
			"-e", filepath.Join(nd, "error.log"), "-g", "daemon off;"}}
	return s
}

// redisArgs starts one Redis node on port: loopback, no persistence; with
// auth, the password from the run directory's private file (a configuration
// file must be redis-server's first argument). Each node has a snapshot
// file of its own name: a replica (the standby) writes the snapshot it
// receives, and a node that found it at start would load it, the last
// cluster's keys with it (the nodes share the run directory).
func redisArgs(bin string, port int, dir string, auth bool) []string {
	args := []string{bin}
	if auth {
		args = append(args, redisAuthConf(dir, port))
	}
	// A full sync starts at once (Redis waits 5 s by default for more
	// replicas to share it): a failover's failback syncs an empty node.
	return append(args, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--repl-diskless-sync-delay", "0",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", dir, "--dbfilename", rdbFile(port))
}

// rdbFile is the snapshot file of the node on port, in the run directory.
func rdbFile(port int) string { return "redis-" + strconv.Itoa(port) + ".rdb" }

// removeRDB removes the nodes' snapshot files (their own names only, and
// the shared default one an earlier version let the standby write), so that
// every up starts empty nodes, as the stock's seed expects.
func removeRDB(dir string, nodes []*Proc) error {
	var errs []error
	for _, name := range []string{"dump.rdb"} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for _, n := range nodes {
		if err := os.Remove(filepath.Join(dir, rdbFile(portOf(n.Addr)))); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// serviceEnv keeps the service's own variables (INVENTORY_*) of environ:
// the replicas read them, and a replica started again (by a scenario, from
// another process) must get the same ones.
func serviceEnv(environ []string) []string {
	var env []string
	for _, kv := range environ {
		if strings.HasPrefix(kv, envPrefix) {
			env = append(env, kv)
		}
	}
	return env
}

// start builds the service and starts the nodes, the replicas and nginx, each
// once the ones it needs answer, then saves the state.
func (c *Cluster) start(ctx context.Context, cfg Config) error {
	say := func(format string, args ...any) { fmt.Fprintf(cfg.Log, "cluster: "+format+"\n", args...) }
	var ports []int
	for _, n := range c.redisNodes() {
		ports = append(ports, portOf(n.Addr))
	}
	if err := writeSecrets(c.dir, cfg.RedisPassword, cfg.AdminToken, ports); err != nil {
		return err
	}
	say("building the service")
	if err := os.MkdirAll(filepath.Dir(c.State.Replicas[0].Args[0]), 0o700); err != nil { // go build's would be 0755
		return err
	}
	for bin, pkg := range map[string]string{c.State.Replicas[0].Args[0]: "./cmd/inventory", c.State.Lab.Args[0]: "./cmd/lab"} {
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
		build.Dir, build.Stdout, build.Stderr = cfg.Root, cfg.Log, cfg.Log
		if err := build.Run(); err != nil {
			return fmt.Errorf("cluster: go build %s: %w", pkg, err)
		}
	}
	if c.State.Toxiproxy != nil {
		say("building the clock shim (the clock-jump scenario's)")
		if err := buildClockShim(ctx, c.dir, c.State.Redis); err != nil {
			return err
		}
	}
	if err := removeRDB(c.dir, c.redisNodes()); err != nil { // a crash may have left them
		return err
	}
	if err := c.startAll(ctx, ptrs(c.State.Redis), 10*time.Second); err != nil {
		return err
	}
	for _, m := range c.State.Etcd { // a fresh cluster: a data directory left behind (a crash) goes
		if err := removeEtcdData(etcdData(c.dir, m.Name)); err != nil {
			return err
		}
	}
	if err := c.startAll(ctx, ptrs(c.State.Etcd), 20*time.Second); err != nil {
		return err
	}
	if err := writeZK(c.dir, c.State.ZK); err != nil { // fresh, as etcd's
		return err
	}
	if err := c.startAll(ctx, ptrs(c.State.ZK), 60*time.Second); err != nil {
		return err
	}
	if err := installDB(ctx, c.dir); err != nil {
		return err
	}
	if err := c.startAll(ctx, []*Proc{c.State.DB}, 20*time.Second); err != nil {
		return err
	}
	if err := setupDB(ctx, c.dir, c.State.RedisPassword); err != nil {
		return err
	}
	if t := c.State.Toxiproxy; t != nil {
		say("building toxiproxy (the fault proxies)")
		build := exec.CommandContext(ctx, "go", "build", "-o", t.Args[0], "github.com/Shopify/toxiproxy/v2/cmd/server")
		build.Dir, build.Stdout, build.Stderr = cfg.Root, cfg.Log, cfg.Log
		if err := build.Run(); err != nil {
			return fmt.Errorf("cluster: go build toxiproxy: %w", err)
		}
		if err := writeFaultConfig(c.dir, c.State.FaultProxies); err != nil {
			return err
		}
		if err := c.startAll(ctx, []*Proc{t}, 10*time.Second); err != nil {
			return err
		}
	}
	if err := c.startAll(ctx, ptrs(c.State.Standbys), 10*time.Second); err != nil {
		return err
	}
	if len(c.State.Sentinels) > 0 {
		if err := writeSentinelConfs(c.dir, &c.State); err != nil {
			return err
		}
		if err := c.startAll(ctx, ptrs(c.State.Sentinels), 10*time.Second); err != nil {
			return err
		}
		say("waiting for the sentinels to find the standbys and each other")
		if err := sentinelsReady(ctx, &c.State, 60*time.Second); err != nil {
			return err
		}
	}
	if err := c.startAll(ctx, ptrs(c.State.Replicas), 15*time.Second); err != nil {
		return err
	}
	if err := c.seed(ctx, cfg.Stock); err != nil {
		return err
	}
	if err := c.startAll(ctx, []*Proc{c.State.Lab}, 10*time.Second); err != nil {
		return err
	}
	if err := renderNginx(cfg, c.State); err != nil {
		return err
	}
	if err := checkNginx(ctx, c.State.Nginx); err != nil {
		return err
	}
	if err := c.startAll(ctx, []*Proc{&c.State.Nginx}, 10*time.Second); err != nil {
		return err
	}
	if err := c.save(); err != nil {
		return err
	}
	url := "http://localhost"
	if cfg.Port != 80 {
		url += ":" + strconv.Itoa(cfg.Port)
	}
	say("up: nginx %s -> %d replicas (%s...) with -lock %s -work %s, GOMAXPROCS %s; redis %s...; etcd %s...; zookeeper %s...; mariadb %s; logs in %s",
		url, cfg.Replicas, c.State.Replicas[0].Addr, cfg.Lock, cfg.Work, gomaxprocs(cfg.Replicas), c.State.Redis[0].Addr,
		c.State.Etcd[0].Addr, c.State.ZK[0].Addr, c.State.DB.Addr, cfg.Dir)
	say("the lab: open %s/ in a browser", url)
	say("try: curl -X POST %s/sale    |    go run ./loadtest -url %s/sale -lock all    |    make down", url, url)
	if cfg.AdminToken != "" {
		say("the admin token (PUT /stock, GET /history, the fault hooks) is in %s", AdminTokenFile(cfg.Dir))
	}
	return nil
}

// startAll starts procs (in place, so their pids are kept) and waits until
// each answers. The state is saved after each start, so a failure stops them.
func (c *Cluster) startAll(ctx context.Context, procs []*Proc, limit time.Duration) error {
	for _, p := range procs {
		if err := p.start(); err != nil {
			return err
		}
		if err := c.save(); err != nil {
			return err
		}
	}
	for _, p := range procs {
		if err := c.ready(ctx, p, limit); err != nil {
			return fmt.Errorf("%w; log: %s", err, p.Log)
		}
	}
	return nil
}

func ptrs(ps []Proc) []*Proc {
	out := make([]*Proc, len(ps))
	for i := range ps {
		out[i] = &ps[i]
	}
	return out
}

// seed sets the stock once, as the tutorial does with redis-cli (a later up
// keeps it), on the key the replicas report, and records the keys.
func (c *Cluster) seed(ctx context.Context, stock int64) error {
	h, err := service.At("http://" + c.State.Replicas[0].Addr).Health(ctx)
	if err != nil {
		return err
	}
	c.State.StockKey, c.State.LockKey = h.StockKey, h.LockKey
	rdb := redisconn.New(c.State.StockNode().Addr, c.State.RedisPassword)
	defer rdb.Close()
	if err := rdb.SetNX(ctx, h.StockKey, stock, 0).Err(); err != nil {
		return fmt.Errorf("cluster: seed %s: %w", h.StockKey, err)
	}
	return nil
}

// lookPath is name's full path, or name when it is not on the PATH (nginx
// lives in /usr/sbin, outside a user's PATH on Debian).
func lookPath(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin"} {
		if p := filepath.Join(dir, name); executable(p) {
			return p
		}
	}
	return name
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}
