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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"
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

// RedlockOnly names the Redis nodes only Redlock uses: every node but the
// stock's. The lab's Redlock lesson may stop them (Kill), and no other.
func (c *Cluster) RedlockOnly() []string {
	var names []string
	for i, p := range c.State.Redis {
		if i == 0 {
			continue
		}
		names = append(names, p.Name)
	}
	return names
}

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
	stop := func(p *Proc) {
		ran, err := p.stop(20 * time.Second)
		if ran {
			stopped++
		}
		errs = append(errs, err)
	}
	if c.State.Lab != nil {
		stop(c.State.Lab)
		// The lab, closing, starts again every Redis node a lesson had
		// stopped, and saves each one's new pid: read back, or down would
		// signal the old, dead pid and leave the new node running.
		if now, err := Load(c.dir); err == nil {
			c.State.Redis = now.State.Redis
		}
	}
	for _, p := range c.State.procs() {
		if p != c.State.Lab {
			stop(p)
		}
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

// redisNodes are the Redis processes: the nodes and the standbys.
func (c *Cluster) redisNodes() []*Proc {
	return append(ptrs(c.State.Redis), ptrs(c.State.Standbys)...)
}
