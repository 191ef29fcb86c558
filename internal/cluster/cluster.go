// Package cluster is the local cluster: the tutorial's deployment on one
// machine, without Docker. Up starts three independent redis-server nodes
// (no persistence, no replication) where the service's defaults point, the
// inventory replicas (with -lock-override) on ports from the service's default
// one upwards, and nginx balancing them; it writes everything it started into
// one JSON state file. Down stops exactly that. The scenarios, the bench and
// the end-to-end suite read the same file to find, freeze, kill and restart
// the processes: one owner for the cluster, and a pid is signalled only after
// checking that it still runs the command the cluster started.
package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/procstate"
	"github.com/locklab/locklab/internal/redisconn"
	"github.com/redis/go-redis/v9"
)

// Config is what Up starts. Zero fields take the defaults below.
type Config struct {
	Root     string // the checkout: ./cmd/inventory is built from it, deploy/nginx.conf read
	Dir      string // the run directory: logs, the binary, the state file; default Root/.run
	Port     int    // nginx's port; default 80
	Replicas int    // default 2
	Lock     string // the replicas' -lock; default v1
	// Work is the replicas' -work; default 1ms: business time between
	// reading and writing the stock, which keeps the read-modify-write
	// window open long enough that v1's and v2's oversell shows in every run.
	Work  string
	Stock int64 // seeded once (SET NX); default 100
	Pprof bool  // each replica serves Go's profiler on 127.0.0.1:6060, :6061, ...
	// Faults puts a toxiproxy between each replica and each Redis node (see
	// faults.go): the scenarios' network faults. Off by default: a proxy
	// costs every command a hop, and the demo and the bench measure without.
	Faults bool
	// Sentinel gives the stock's node two standbys and three Redis
	// Sentinels (sentinel.go), and the replicas -sentinel: Sentinel fails
	// the node over. With Faults too each standby replicates through a
	// fault proxy of its own.
	Sentinel bool
	// RedisPassword, when set, is required by every node (which reads it from
	// a private file) and given to the replicas through their environment,
	// INVENTORY_REDIS_PASSWORD: never on a command line (see secrets.go).
	RedisPassword string
	// AdminToken, when set, is the replicas' admin token: through their
	// environment (INVENTORY_ADMIN_TOKEN), in the state, and in
	// AdminTokenFile for a person. The fault hooks need one.
	AdminToken string
	Log        io.Writer // progress messages; default stderr
}

func (c Config) withDefaults() Config {
	if c.Root == "" {
		c.Root = "."
	}
	if c.Dir == "" {
		c.Dir = filepath.Join(c.Root, ".run")
	}
	if c.Port == 0 {
		c.Port = 80
	}
	if c.Replicas == 0 {
		c.Replicas = 2
	}
	if c.Lock == "" {
		c.Lock = "v1"
	}
	if c.Work == "" {
		c.Work = "1ms"
	}
	if c.Stock == 0 {
		c.Stock = 100
	}
	if c.Log == nil {
		c.Log = os.Stderr
	}
	return c
}

// State is the cluster as Up left it: the state file's content.
type State struct {
	Port     int    `json:"port"`
	URL      string `json:"url"` // the sale endpoint through nginx
	StockKey string `json:"stock_key"`
	LockKey  string `json:"lock_key"`
	// Redis are the nodes: the first holds the stock and the single-node
	// locks, redlock uses all of them, the last only redlock uses.
	Redis []Proc `json:"redis"`
	// Etcd are the members of the etcd lock's cluster.
	Etcd []Proc `json:"etcd"`
	// ZK are the members of the zk lock's ZooKeeper ensemble.
	ZK []Proc `json:"zk,omitempty"`
	// DB is the database lock's MariaDB server.
	DB       *Proc  `json:"db,omitempty"`
	Replicas []Proc `json:"replicas"`
	Nginx    Proc   `json:"nginx"`
	// Toxiproxy and FaultProxies are there when the cluster was started with
	// Faults: the proxy server, and its proxy per replica and node.
	Toxiproxy    *Proc        `json:"toxiproxy,omitempty"`
	FaultProxies []FaultProxy `json:"fault_proxies,omitempty"`
	// Standbys are the stock node's asynchronous replicas: one with
	// Faults, two with Sentinel. Sentinels watch the node (with Sentinel).
	Standbys  []Proc `json:"standbys,omitempty"`
	Sentinels []Proc `json:"sentinels,omitempty"`
	// OldStandby is the one standby of a state file written before there
	// could be two: Load moves it into Standbys, so that down stops it.
	OldStandby *Proc `json:"standby,omitempty"`
	// Lab is the lab (cmd/lab): nginx routes / and /lab/ to it.
	Lab *Proc `json:"lab,omitempty"`
	// RedisPassword is needed to watch the nodes, AdminToken to drive the
	// fault hooks; the file is private.
	RedisPassword string `json:"redis_password,omitempty"`
	AdminToken    string `json:"admin_token,omitempty"`
}

// StockNode is the node of the stock and the single-node locks.
func (s *State) StockNode() Proc { return s.Redis[0] }

// Addrs lists every address the processes listen on, in stop order.
func (s State) Addrs() []string {
	var addrs []string
	for _, p := range s.procs() {
		addrs = append(append(addrs, p.Addr), p.Extra...)
	}
	return addrs
}

// procs lists every process in stop order: nginx, then the replicas (which
// finish their sales), then the sentinels (before the nodes they would fail
// over), the fault proxies, the standbys, Redis, etcd, ZooKeeper and the
// database.
func (s *State) procs() []*Proc {
	var lab, proxy, db []*Proc
	if s.Lab != nil {
		lab = []*Proc{s.Lab}
	}
	if s.DB != nil {
		db = []*Proc{s.DB}
	}
	if s.Toxiproxy != nil {
		proxy = []*Proc{s.Toxiproxy}
	}
	return slices.Concat(lab, []*Proc{&s.Nginx}, ptrs(s.Replicas), ptrs(s.Sentinels), proxy, ptrs(s.Standbys), ptrs(s.Redis), ptrs(s.Etcd), ptrs(s.ZK), db)
}

// Cluster is a running local cluster, as its state file describes it.
type Cluster struct {
	dir   string
	State State

	// restarting serializes what restarts change in State (a process's pid
	// and start time) and the state file's writes: restarts may run at once
	// (a scenario brings two nodes back inside one lease).
	restarting sync.Mutex
}

// stateFile is the state file in dir.
func stateFile(dir string) string { return filepath.Join(dir, "cluster.json") }

// ErrNotUp means there is no state file: the cluster was not started in that
// run directory (or has been stopped).
var ErrNotUp = errors.New("cluster: not up")

// Load reads the state of the cluster whose run directory is dir, after
// checking that dir is the caller's own (see rundir.go): the pids of a state
// file someone else could write are never signalled.
func Load(dir string) (*Cluster, error) {
	err := checkRunDir(dir)
	if err == nil {
		var raw []byte
		if raw, err = os.ReadFile(stateFile(dir)); err == nil {
			c := &Cluster{dir: dir}
			if err := json.Unmarshal(raw, &c.State); err != nil {
				return nil, fmt.Errorf("cluster: %s: %w", stateFile(dir), err)
			}
			if sb := c.State.OldStandby; sb != nil {
				c.State.Standbys, c.State.OldStandby = append(c.State.Standbys, *sb), nil
			}
			return c, nil
		}
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s (start it with make up, or give its run directory)", ErrNotUp, dir)
	}
	return nil, err
}
func (c *Cluster) save() error {
	raw, err := json.MarshalIndent(c.State, "", "  ")
	if err != nil {
		return err
	}
	// Private: it may hold the Redis password and the admin token.
	return writePrivate(stateFile(c.dir), append(raw, '\n'))
}

// Running counts the cluster's processes that still run, of all.
func (c *Cluster) Running() (running, all int) {
	for _, p := range c.State.procs() {
		if p.Pid > 0 {
			all++
			if p.alive() {
				running++
			}
		}
	}
	return running, all
}

// Status writes one line per process: up or down, and its pid.
func (c *Cluster) Status(w io.Writer) {
	for _, p := range c.State.procs() {
		state := "down"
		if p.alive() {
			state = "up  "
		}
		fmt.Fprintf(w, "%s  %-12s %-16s pid %d\n", state, p.Name, p.Addr, p.Pid)
	}
}

// Down stops every process the cluster started and removes the state file;
// logs stay in the run directory. It returns how many processes it stopped.
func (c *Cluster) Down() (int, error) {
	stopped := 0
	var errs []error
	for _, p := range c.State.procs() {
		ran, err := p.stop(20 * time.Second)
		if ran {
			stopped++
		}
		errs = append(errs, err)
	}
	if err := os.Remove(stateFile(c.dir)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	// etcd's data goes with its members, as Redis' (never persisted) does:
	// the next up starts a fresh cluster.
	for _, m := range c.State.Etcd {
		errs = append(errs, removeEtcdData(etcdData(c.dir, m.Name)))
	}
	for _, m := range c.State.ZK {
		errs = append(errs, removeZKData(zkData(c.dir, m.Name)), removeFile(zkConfig(c.dir, m.Name)))
	}
	if c.State.DB != nil {
		errs = append(errs, removeDBData(dbData(c.dir)))
	}
	errs = append(errs, removeAOF(c.dir), removeRDB(c.dir, c.redisNodes()), removeSecrets(c.dir), removeSentinelConfs(c.dir, c.State.Sentinels))
	return stopped, errors.Join(errs...)
}

// Freeze stops the named process with SIGSTOP (it answers nothing and keeps
// its state: a long GC pause, a frozen VM) or, with frozen false, resumes it.
func (c *Cluster) Freeze(name string, frozen bool) error {
	p, err := c.proc(name)
	if err != nil {
		return err
	}
	if frozen {
		if err := p.signal(syscall.SIGSTOP); err != nil {
			return err
		}
		return procstate.WaitStopped(p.Pid, 10*time.Second)
	}
	return p.signal(syscall.SIGCONT)
}

// Stopped reports whether the named process is stopped, every thread of it
// (SIGSTOP, by Freeze or by itself).
func (c *Cluster) Stopped(name string) (bool, error) {
	p, err := c.proc(name)
	if err != nil {
		return false, err
	}
	if !p.alive() {
		return false, fmt.Errorf("cluster: %s is not running", name)
	}
	return procstate.Stopped(p.Pid)
}

// Kill kills the named process with SIGKILL, as a crash would (no release,
// no watchdog stop), and returns what starts it again as it was (same
// arguments, environment and log; a Redis node comes back empty) and waits
// until it answers.
func (c *Cluster) Kill(name string) (restart func(context.Context) error, err error) {
	return c.stop(name, syscall.SIGKILL, 10*time.Second)
}

// Terminate stops the process name with SIGTERM, as `docker stop` does: a
// replica cancels the sales waiting for the lock and lets the holders finish.
// restart waits until it has exited (its grace period is seconds), then
// starts it again.
func (c *Cluster) Terminate(name string) (restart func(context.Context) error, err error) {
	return c.stop(name, syscall.SIGTERM, 30*time.Second)
}

// KillWith is Kill, and restart starts the process with extra arguments
// after its own (a Redis node that comes back with persistence on, say);
// the state keeps only its own, so a later restart drops them. Restarts may
// run at once; nothing else of a Cluster may run beside them.
func (c *Cluster) KillWith(name string, extra ...string) (restart func(context.Context) error, err error) {
	return c.stop(name, syscall.SIGKILL, 10*time.Second, extra...)
}

func (c *Cluster) stop(name string, sig syscall.Signal, limit time.Duration, extra ...string) (restart func(context.Context) error, err error) {
	p, err := c.proc(name)
	if err != nil {
		return nil, err
	}
	if err := p.signal(sig); err != nil {
		return nil, err
	}
	pid := p.Pid
	return func(ctx context.Context) error {
		if !waitGone(pid, limit) {
			return fmt.Errorf("cluster: %s (pid %d) did not exit within %s of %s", name, pid, limit, sig)
		}
		return c.restart(ctx, p, extra...)
	}, nil
}

func (c *Cluster) proc(name string) (*Proc, error) {
	for _, p := range c.State.procs() {
		if p.Name == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("cluster: no process %q", name)
}

// restart starts p again and waits until it answers. The killed process's
// port is free once the kernel has reaped it, so a start that exits at once
// (the port still taken) is tried again.
func (c *Cluster) restart(ctx context.Context, p *Proc, extra ...string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.restarting.Lock()
		err := p.start(extra...)
		c.restarting.Unlock()
		if err != nil {
			return err
		}
		if err = c.ready(ctx, p, 2*time.Second); err == nil {
			c.restarting.Lock()
			defer c.restarting.Unlock()
			return c.save()
		}
		if p.alive() || time.Now().After(deadline) {
			// Running but not answering is still running: the state must
			// know its pid, or down would leave it behind.
			c.restarting.Lock()
			defer c.restarting.Unlock()
			return errors.Join(fmt.Errorf("cluster: %s did not come back: %w", p.Name, err), c.save())
		}
	}
}

// ready waits until p answers: PING for a Redis node, /readyz for a replica,
// /healthz through it for nginx.
func (c *Cluster) ready(ctx context.Context, p *Proc, limit time.Duration) error {
	switch {
	case p.Name == "nginx":
		return waitUntil(ctx, limit, p.Name, func() bool { return p.alive() && httpOK(ctx, "http://"+p.Addr+"/healthz") })
	case p.Name == "toxiproxy": // its API answers and every proxy listens
		return waitUntil(ctx, limit, p.Name, func() bool {
			if !p.alive() || !httpOK(ctx, "http://"+p.Addr+"/version") {
				return false
			}
			return !slices.ContainsFunc(p.Extra, func(a string) bool { return !listening(a) })
		})
	case p.Name == "mariadb":
		return waitUntil(ctx, limit, p.Name, func() bool { return p.alive() && dbReady(ctx, c.dir) })
	case strings.HasPrefix(p.Name, "zookeeper"): // serving: in a quorum
		return waitUntil(ctx, limit, p.Name, func() bool {
			_, err := ZKMode(p.Addr, time.Second)
			return p.alive() && err == nil
		})
	case strings.HasPrefix(p.Name, "etcd"): // healthy: the member has a leader
		return waitUntil(ctx, limit, p.Name, func() bool { return p.alive() && httpOK(ctx, "http://"+p.Addr+"/health") })
	case strings.HasPrefix(p.Name, "sentinel"):
		rdb := redis.NewSentinelClient(redisconn.Options(p.Addr, c.State.RedisPassword))
		defer rdb.Close()
		return waitUntil(ctx, limit, p.Name, func() bool { return p.alive() && listening(p.Addr) && rdb.Ping(ctx).Err() == nil })
	case strings.HasPrefix(p.Name, "redis"):
		rdb := redisconn.New(p.Addr, c.State.RedisPassword)
		defer rdb.Close()
		return waitUntil(ctx, limit, p.Name, func() bool { return p.alive() && listening(p.Addr) && rdb.Ping(ctx).Err() == nil })
	default:
		return waitUntil(ctx, limit, p.Name, func() bool { return p.alive() && httpOK(ctx, "http://"+p.Addr+"/readyz") })
	}
}

// listening reports whether something accepts connections at addr. Dialling
// first keeps go-redis from logging every refused dial of a starting node.
func listening(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

func httpOK(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode == http.StatusOK
}

// health reads a replica's /healthz: the keys it uses.
func health(ctx context.Context, addr string) (api.Health, error) {
	var h api.Health
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
	if err != nil {
		return h, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return h, err
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(&h); err != nil {
		return h, fmt.Errorf("cluster: %s/healthz: %w", addr, err)
	}
	return h, nil
}

// portOf is addr's port.
func portOf(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

// redisPorts are the ports of the service's default redlock nodes: where the
// cluster starts its Redis.
func redisPorts() []int { return ports(api.DefaultRedlock) }

// etcdPorts are the client ports of the service's default etcd members:
// where the cluster starts its etcd (each member's peer port is the next).
func etcdPorts() []int { return ports(api.DefaultEtcd) }

func ports(list string) []int {
	nodes, err := redisconn.ParseList(list)
	if err != nil {
		panic("cluster: " + list + ": " + err.Error())
	}
	ports := make([]int, len(nodes))
	for i, n := range nodes {
		ports[i] = portOf(n)
	}
	return ports
}

// removeAOF removes the append-only files a Redis node writes in dir when a
// scenario switches its persistence on (redlock-restart+fsync; the nodes
// share the run directory, and only that node ever writes one): Redis's
// appendonlydir, its appendonly.aof.* files, and nothing else.
func removeAOF(dir string) error {
	aof := filepath.Join(dir, "appendonlydir")
	files, err := filepath.Glob(filepath.Join(aof, "appendonly.aof.*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range files {
		errs = append(errs, os.Remove(f))
	}
	_ = os.Remove(aof) // only if empty: anything else in it is not ours
	return errors.Join(errs...)
}

// gomaxprocs gives each replica its share of the cores, as a container's CPU
// limit would (Go sizes GOMAXPROCS from that limit): two Go runtimes each
// scheduling on every core of a 2-core machine spend it spinning against each
// other (measured: ~1.2x the locked sales/s with the share). GOMAXPROCS in the
// environment wins.
func gomaxprocs(replicas int) string {
	if v := os.Getenv("GOMAXPROCS"); v != "" {
		return v
	}
	return strconv.Itoa(max(1, runtime.NumCPU()/replicas))
}

// Clean removes what Up creates in cfg's run directory, and nothing else: the
// logs, the state file, the binary, nginx's files and temp directories; each
// directory only once it is empty, so a run directory a user pointed at a
// folder of their own keeps their files. It refuses while the cluster runs.
func Clean(cfg Config) error {
	cfg = cfg.withDefaults()
	switch err := checkRunDir(cfg.Dir); {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	}
	if c, err := Load(cfg.Dir); err == nil {
		if running, _ := c.Running(); running > 0 {
			return fmt.Errorf("cluster: %d processes still run in %s: make down first", running, cfg.Dir)
		}
	}
	cfg.Faults, cfg.Sentinel = true, true // made with or without them: their files go either way
	s := Plan(cfg)
	nginx := nginxDir(cfg.Dir)
	files := []string{stateFile(cfg.Dir), s.Replicas[0].Args[0], s.Lab.Args[0], filepath.Join(nginx, "nginx.conf"), filepath.Join(nginx, "nginx.pid"),
		s.Toxiproxy.Args[0], faultConfig(cfg.Dir), filepath.Join(cfg.Dir, "mariadb.pid")}
	for _, p := range s.procs() {
		files = append(files, p.Log)
	}
	// A larger REPLICAS at up left more replica logs than this plan has.
	if more, err := filepath.Glob(filepath.Join(cfg.Dir, "inventory-*.log")); err == nil {
		files = append(files, more...)
	}
	nodes := append(ptrs(s.Redis), ptrs(s.Standbys)...)
	errs := []error{removeAOF(cfg.Dir), removeRDB(cfg.Dir, nodes), removeDBData(dbData(cfg.Dir)), removeSecrets(cfg.Dir), removeSentinelConfs(cfg.Dir, s.Sentinels)}
	for _, m := range s.Etcd {
		errs = append(errs, removeEtcdData(etcdData(cfg.Dir, m.Name)))
	}
	for _, m := range s.ZK {
		errs = append(errs, removeZKData(zkData(cfg.Dir, m.Name)), removeFile(zkConfig(cfg.Dir, m.Name)))
	}
	var dirs []string
	for _, t := range nginxTemps {
		dirs = append(dirs, filepath.Join(nginx, "tmp", t))
	}
	dirs = append(dirs, filepath.Join(nginx, "tmp"), nginx, filepath.Dir(s.Replicas[0].Args[0]), cfg.Dir)
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for _, d := range dirs {
		_ = os.Remove(d) // only if empty: anything else in it is not ours
	}
	return errors.Join(errs...)
}

// redisNodes are the Redis processes: the nodes and the standbys.
func (c *Cluster) redisNodes() []*Proc {
	return append(ptrs(c.State.Redis), ptrs(c.State.Standbys)...)
}
