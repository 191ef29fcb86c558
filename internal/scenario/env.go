package scenario

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/client"
	"github.com/locklab/locklab/internal/history"
	"github.com/locklab/locklab/internal/reason"
	"github.com/locklab/locklab/internal/versions"
	"github.com/redis/go-redis/v9"
)

// Env is the cluster a scenario runs against.
type Env struct {
	URL        string        // the sale endpoint through nginx, http://localhost/sale
	AdminToken string        // the fault hooks answer only to it
	Redis      *redis.Client // the stock's and single-node locks' node: watched, and written only to inject a fault
	LockKey    string        // as the replicas report it on /healthz
	StockKey   string
	TTL        time.Duration // the replicas' -ttl (from /healthz)
	// AcquireTimeout is the replicas' -acquire-timeout (from /healthz):
	// how long a sale waits for the lock before its 503.
	AcquireTimeout time.Duration
	// Claim is the replicas' -claim (from /healthz; 0: not reported): how
	// long a waiter handed the lock has to take it.
	Claim time.Duration
	// Client calls the service (with AdminToken): through nginx, or one
	// replica (at).
	Client *client.Client
	// Stores watches each lock where it lives and frees it (nil: no lock
	// can be watched). ZKMembers are the zk lock's ensemble's members (none:
	// the stack has none); DBNode is the database's process.
	Stores    Stores
	ZKMembers []Member
	DBNode    string
	// Replicas are two replicas, each reached directly; StockNode is the
	// process of the stock's (and single-node locks') Redis node, SpareNodes
	// the ones only redlock uses, EtcdMembers the etcd lock's members, by
	// process name and client address. Procs freezes and kills them: the
	// scenarios that pause, crash or take down a process need it.
	Replicas    [2]Replica
	StockNode   string
	SpareNodes  []string
	SpareRedis  []*redis.Client // a client of each spare node, in SpareNodes' order
	EtcdMembers []Member
	Procs       Processes
	// Standbys are the stock node's asynchronous replicas; StockAddr is
	// the stock node's address. Sentinels (addresses), when the cluster has
	// them, watch the stock's node by the name SentinelMaster, and the
	// replicas follow the primary they name.
	Standbys       []Standby
	StockAddr      string
	Sentinels      []string
	SentinelMaster string
	// Faults controls the proxies between each replica and each Redis node
	// (nil: the cluster has none); the network scenarios need it.
	Faults *toxiproxy.Client

	lock string // the running cell's version: where its lock is watched
	off  string // the fixes every sale of the cell switches off (off=, a mutation's), "" none

	cell  string        // the running cell's id: its requests' ids start with it
	seq   *atomic.Int64 // the cell's requests, numbered
	marks *marks        // the faults the cell injected, for its timeline
}

// marks collects a cell's injected faults.
type marks struct {
	mu   sync.Mutex
	list []history.Mark
}

// mark records an injected fault, now.
func (e Env) mark(what reason.Reason) {
	if e.marks == nil {
		return
	}
	e.marks.mu.Lock()
	defer e.marks.mu.Unlock()
	e.marks.list = append(e.marks.list, history.Mark{At: time.Now(), Label: what.Text, Code: what.Code, Params: what.Params})
}

// Standby is one asynchronous replica of the stock's node: its process
// name, address, the address it replicates from (its own fault proxy's), and
// a client.
type Standby struct {
	Name, Addr, Link string
	Redis            *redis.Client
}

// Replica is one replica: its process name and its own /sale endpoint.
type Replica struct {
	Name, URL string
}

// Member is one etcd or ZooKeeper member: its process name and client
// address.
type Member struct {
	Name, Addr string
}

// Processes controls the cluster's processes by name (the local cluster's
// package cluster does it with signals).
type Processes interface {
	// Freeze stops the process (SIGSTOP: it answers nothing, keeps its
	// state) or, with frozen false, resumes it.
	Freeze(name string, frozen bool) error
	// Kill kills the process, as a crash would, and returns what starts it
	// again and waits until it answers.
	Kill(name string) (restart func(context.Context) error, err error)
	// KillWith is Kill, and the restart gives the process extra arguments
	// (this once: a later restart drops them).
	KillWith(name string, extra ...string) (restart func(context.Context) error, err error)
	// Stopped reports whether the process is stopped (SIGSTOP).
	Stopped(name string) (bool, error)
	// JumpClock sets the Redis node's wall clock to the real time plus d,
	// at once (0: the real time again).
	JumpClock(name string, d time.Duration) error
}

// Close closes the Env's clients.
func (e Env) Close() error {
	errs := []error{e.Redis.Close()}
	for _, sb := range e.Standbys {
		errs = append(errs, sb.Redis.Close())
	}
	for _, c := range e.SpareRedis {
		errs = append(errs, c.Close())
	}
	if e.Stores != nil {
		errs = append(errs, e.Stores.Close())
	}
	return errors.Join(errs...)
}

// ClearLock deletes lock's key and its wait queues (etcd's: every key under
// its prefix), so that what comes next finds the lock free and nobody
// queued: v3's key stays for ever once its holder was killed, and would stop
// every later version that shares it; a killed waiter's queue entry would
// stand before the next cell's waiters.
func (e Env) ClearLock(ctx context.Context, lock string) error {
	if e.Stores == nil {
		return errors.New("scenario: no stores to clear the " + lock + " lock in")
	}
	if err := e.Stores.Clear(ctx, lock); err != nil {
		return fmt.Errorf("scenario: clearing the %s lock: %w", lock, err)
	}
	return nil
}

// reset frees the lock (ClearLock) and sets the stock to 10 (through the
// service), and returns it.
func (e Env) reset(ctx context.Context) (int64, error) {
	if err := e.ClearLock(ctx, e.lock); err != nil {
		return 0, err
	}
	if err := e.at(e.URL).SetStock(ctx, 10); err != nil {
		return 0, fmt.Errorf("scenario: %w", err)
	}
	return 10, nil
}

// at is the Env's client of the service whose sale endpoint is saleURL:
// nginx's (URL), or a replica's own (Replica.URL).
func (e Env) at(saleURL string) *client.Client {
	return e.Client.At(strings.TrimSuffix(saleURL, "/sale"))
}

// Lacks says what the Env lacks to run lock's cells ("": nothing): a stack
// started without its database or its ZooKeeper ensemble.
func (e Env) Lacks(lock string) string { return e.LacksWhy(lock).Text }

// LacksWhy is Lacks as a reason, for the lab's page (its Text "": nothing).
func (e Env) LacksWhy(lock string) reason.Reason {
	if versions.NeedsDB(lock) && !e.has("db") {
		return reason.New("noDatabase", "this stack has no database for the {lock} lock", "lock", lock)
	}
	if versions.NeedsZK(lock) && !e.has("zk") {
		return reason.New("noZooKeeper", "this stack has no ZooKeeper ensemble for the zk lock")
	}
	return reason.Reason{}
}

// ErrNoFaultHooks is an Env asked of replicas whose /healthz says their
// fault hooks are off: no scenario can act on them.
var ErrNoFaultHooks = errors.New("scenario: the replicas run without -chaos and -admin-token")

// NewEnv is the Env of replicas that reported h on /healthz, as far as h
// says: their keys, lease, acquire deadline and claim deadline; the fault
// hooks answer to adminToken. The caller adds the stack's processes and
// clients (Local, Compose).
func NewEnv(h api.Health, adminToken string) (Env, error) {
	ttl, acquire, err := deadlines(h)
	if err != nil {
		return Env{}, err
	}
	return Env{AdminToken: adminToken, LockKey: h.LockKey, StockKey: h.StockKey, TTL: ttl, AcquireTimeout: acquire,
		Claim: claimDeadline(h), Client: client.New("", adminToken)}, nil
}

// claimDeadline reads the replicas' -claim off /healthz (0: not reported).
func claimDeadline(h api.Health) time.Duration {
	d, _ := time.ParseDuration(h.Settings["claim"])
	return d
}

// deadlines reads the replicas' -ttl and -acquire-timeout off /healthz.
func deadlines(h api.Health) (ttl, acquire time.Duration, err error) {
	if ttl, err = time.ParseDuration(h.Settings["ttl"]); err != nil {
		return 0, 0, fmt.Errorf("scenario: the replicas report no -ttl: %w", err)
	}
	if acquire, err = time.ParseDuration(h.Settings["acquire_timeout"]); err != nil {
		return 0, 0, fmt.Errorf("scenario: the replicas report no -acquire-timeout: %w", err)
	}
	return ttl, acquire, nil
}
