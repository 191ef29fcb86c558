// Package builder builds every lock version of the catalogue
// (internal/versions) as a sale.Method, from the clients the service was
// given. Only the binaries that build locks import it (the service, the
// bench, the tests that need real locks): the catalogue itself, and the
// server, the load test and the checker that read it, link no lock package
// and no driver (versions' TestReadersLinkNoLock; the lab still links them
// through the scenarios' environment).
package builder

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/lease"
	dblock "github.com/locklab/locklab/internal/locks/db"
	etcdlock "github.com/locklab/locklab/internal/locks/etcd"
	libredislock "github.com/locklab/locklab/internal/locks/redislock"
	"github.com/locklab/locklab/internal/locks/redlock"
	"github.com/locklab/locklab/internal/locks/replicaack"
	"github.com/locklab/locklab/internal/locks/retry"
	librueidislock "github.com/locklab/locklab/internal/locks/rueidislock"
	mutex "github.com/locklab/locklab/internal/locks/v1_mutex"
	setnx "github.com/locklab/locklab/internal/locks/v3_setnx"
	lua "github.com/locklab/locklab/internal/locks/v6_lua"
	reentrant "github.com/locklab/locklab/internal/locks/v7_reentrant"
	watchdog "github.com/locklab/locklab/internal/locks/v8_watchdog"
	zklock "github.com/locklab/locklab/internal/locks/zk"
	"github.com/locklab/locklab/internal/sale"
	"github.com/locklab/locklab/internal/versions"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Deps are what the versions are built from. Zero fields take the service's
// defaults.
type Deps struct {
	Redis *redis.Client // the single-node locks' Redis (and the stock's)
	// Sentinels and SentinelMaster, when set, are the Redis Sentinels that
	// name Redis's node (Redis is then their failover client): the locks
	// with a client of their own (rueidislock) ask them too.
	Sentinels      []string
	SentinelMaster string
	Redlock        []redis.UniversalClient // the independent Redlock nodes
	// RedlockNames name the Redlock nodes, in their order
	// (redisconn.NodeName): the store's reading of each (Queues.ReadNodes).
	RedlockNames []string
	// Etcd is the etcd lock's cluster; nil: the etcd version answers every
	// sale with an error (unavailable), as a node that is down would.
	Etcd *clientv3.Client
	// DB is the database lock's MariaDB; nil: the db version answers every
	// sale with an error (unavailable).
	DB *sql.DB
	// DBHolds is the same MariaDB as db-getlock uses it (dblock.OpenHolds:
	// a connection held for each hold, no read timeout); nil: db-getlock
	// answers every sale with an error (unavailable).
	DBHolds *sql.DB
	// ZK is the zk lock's ZooKeeper session; nil: the zk version answers
	// every sale with an error (unavailable).
	ZK      *zklock.Session
	LockKey string        // default api.DefaultLockKey, the tutorial's
	TTL     time.Duration // the lease (v4 on); default 20 s, the tutorial's
	Retry   time.Duration // mean wait between polls, single-node locks; default 20 ms
	// Claim is how long a waiter handed the lock (-wait handoff) has to
	// claim it; default handoff.DefaultClaim.
	Claim time.Duration
	// RedlockRetry is redlock's: each attempt is a round trip to every node
	// (and a release on all of them when it fails), so it polls less often;
	// default 100 ms.
	RedlockRetry time.Duration
	// Notifier is the lock key's subscription, needed for Wait "notify" and
	// "handoff".
	Notifier *retry.Notifier
	// ReplicaAck is how many replicas of the single-node locks' node must
	// acknowledge each acquisition (0: none, Redis's asynchronous default).
	ReplicaAck int
	Log        *slog.Logger // nil: discard
	Observer   Observer     // nil: none
}

// Observer is told what the locks do in the background: the attempts each
// acquisition made, and v8's renewals and lost leases.
type Observer interface {
	Attempts(lock, wait string, n int)
	watchdog.Observer
}

// Build returns one sale.Method per version, built as v says.
func Build(d Deps, v versions.Variant) map[string]sale.Method {
	d = d.withDefaults()
	if versions.Queued(v.Wait) && d.Notifier == nil {
		panic("builder: Wait " + v.Wait + " needs Deps.Notifier")
	}
	// The token domains: the single-node locks' counter beside the lock on
	// the stock's node, and redlock's counters on its nodes.
	domain := func(name string) string {
		if !v.Fence {
			return ""
		}
		return name
	}
	polled := func(name string, g retry.Guard, interval time.Duration, fence string) sale.Method {
		return sale.Method{Name: name, Lock: retry.Poll(g, interval, d.counter(name, "poll")), Fence: fence, Wait: "poll"}
	}
	// The single-node locks wait, after each acquisition, for their node's
	// replicas to acknowledge it when -replica-ack (or the request) asks.
	acked := func(m sale.Method) sale.Method {
		m.Lock = replicaack.Wrap(m.Lock, d.Redis, d.LockKey+":ack", d.ReplicaAck)
		return m
	}
	single := func(name string, g retry.Queuer) sale.Method {
		m := sale.Method{Name: name, Fence: domain("redis"), Wait: v.Wait}
		switch v.Wait {
		case "notify":
			m.Lock = retry.Notify(g, d.Notifier, d.counter(name, v.Wait))
		case "handoff":
			m.Lock, m.Rides = retry.Handoff(g, d.Notifier, d.counter(name, v.Wait)), true
		default:
			return acked(polled(name, g, d.Retry, domain("redis")))
		}
		return acked(m)
	}
	local := func(name string) sale.Method {
		return sale.Method{Name: name, Lock: retry.Local(mutex.New(), d.counter(name, ""))}
	}
	key, ttl, fence, handoff, claim := d.LockKey, d.TTL, v.Fence, v.Wait == "handoff", d.Claim
	if v.Lease > 0 {
		ttl = v.Lease
	}
	hash := reentrant.Options{Key: key, TTL: ttl, Fence: fence, Handoff: handoff, Claim: claim}
	methods := map[string]sale.Method{
		"none":       {Name: "none"},
		"v1":         local("v1"),
		"v2":         local("v2"),
		"v3":         single("v3", setnx.New(d.Redis, setnx.Options{Key: key, Fence: fence, Handoff: handoff, Claim: claim})),
		"v4":         single("v4", setnx.New(d.Redis, setnx.Options{Key: key, TTL: ttl, Fence: fence, Handoff: handoff, Claim: claim})),
		"v5":         single("v5", setnx.New(d.Redis, setnx.Options{Key: key, TTL: ttl, OwnerCheck: true, Fence: fence, Handoff: handoff, Claim: claim})),
		"v6":         single("v6", lua.New(d.Redis, lua.Options{Key: key, TTL: ttl, Fence: fence, Handoff: handoff, Claim: claim})),
		"v7":         single("v7", reentrant.New(d.Redis, hash)),
		"v8":         single("v8", watchdog.New(d.Redis, hash, d.Log.With("lock", "v8"), d.Observer)),
		"redlock":    polled("redlock", redlock.New(d.Redlock, redlock.Options{Key: key, TTL: ttl, Fence: fence}), d.RedlockRetry, domain("redlock")),
		"etcd":       {Name: "etcd", Lock: d.etcd(key, ttl, fence), Fence: domain("etcd"), Wait: "watch"},
		"zk":         {Name: "zk", Lock: d.zk(key, fence), Fence: domain("zk"), Wait: "watch"},
		"db-seed":    d.dbSeed(key, ttl), // no token to fence with
		"db":         d.db(key, ttl, fence, domain("db")),
		"db-getlock": d.dbGetLock(key, fence, domain("db-getlock")),
		// The libraries people use, as their READMEs show them: they wait
		// their own way, and hand out no fencing token.
		"redislock":     {Name: "redislock", Lock: libredislock.New(d.Redis, libredislock.Options{Key: key, TTL: ttl, Retry: d.Retry}), Wait: "poll"},
		"rueidislock":   {Name: "rueidislock", Lock: d.rueidislock(key, ttl, 2), Wait: "invalidation"},
		"rueidislock-1": {Name: "rueidislock-1", Lock: d.rueidislock(key, ttl, 1), Wait: "invalidation"},
		"atomic":        {Name: "atomic", Atomic: true},
	}
	rl := methods["redlock"]
	rl.LeaseHook = true // redsync takes the lease per mutex, so per acquisition
	methods["redlock"] = rl
	for _, name := range []string{"v7", "v8"} { // the tutorial's v7 /sale takes the lock twice
		m := methods[name]
		m.Nested = true
		methods[name] = m
	}
	return methods
}

// BuildAll builds every version once per variant.
func BuildAll(d Deps, variants []versions.Variant) map[versions.Variant]map[string]sale.Method {
	all := make(map[versions.Variant]map[string]sale.Method, len(variants))
	for _, v := range variants {
		all[v] = Build(d, v)
	}
	return all
}

func (d Deps) withDefaults() Deps {
	if d.LockKey == "" {
		d.LockKey = api.DefaultLockKey
	}
	if d.TTL <= 0 {
		d.TTL = 20 * time.Second
	}
	if d.Retry <= 0 {
		d.Retry = retry.DefaultInterval
	}
	if d.RedlockRetry <= 0 {
		d.RedlockRetry = 100 * time.Millisecond
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	return d
}

// etcd is the etcd lock. It waits by itself (each waiter watches the key
// before its own, woken when that one goes): one attempt per acquisition.
func (d Deps) etcd(key string, ttl time.Duration, fence bool) sale.Locker {
	if d.Etcd == nil {
		return noEtcd{}
	}
	return counted{etcdlock.New(d.Etcd, etcdlock.Options{Key: key, TTL: ttl, Fence: fence}), d.counter("etcd", "watch")}
}

// zk is the ZooKeeper lock. It waits by itself (each waiter watches the
// node before its own): one attempt per acquisition. Its hold is the
// session's, whose timeout the service set from -ttl when it dialled.
func (d Deps) zk(key string, fence bool) sale.Locker {
	if d.ZK == nil {
		return noZK{}
	}
	return counted{zklock.New(d.ZK, zklock.Options{Key: key, Fence: fence}), d.counter("zk", "watch")}
}

// rueidislock is rueidis's lock on the single-node locks' Redis, with its
// own client (made at its first sale), on majority of 2*majority-1 keys.
func (d Deps) rueidislock(key string, ttl time.Duration, majority int32) sale.Locker {
	o := d.Redis.Options()
	return librueidislock.New(o.Addr, librueidislock.Options{Key: key, TTL: ttl, Majority: majority, Password: o.Password,
		Sentinels: d.Sentinels, Master: d.SentinelMaster})
}

// counted counts one attempt per acquisition of a lock that waits by itself.
type counted struct {
	l     sale.Locker
	count retry.Counter
}

func (c counted) Acquire(ctx context.Context, owner string) (lease.Lease, error) {
	if c.count != nil {
		defer c.count(1)
	}
	return c.l.Acquire(ctx, owner)
}

// db is the database lock, polled as the single-node locks poll.
func (d Deps) db(key string, ttl time.Duration, fence bool, domain string) sale.Method {
	if d.DB == nil {
		return sale.Method{Name: "db", Lock: noDB{}, Fence: domain, Wait: "poll"}
	}
	g := dblock.New(d.DB, dblock.Options{Key: key, TTL: ttl, Fence: fence})
	return sale.Method{Name: "db", Lock: retry.Poll(g, d.Retry, d.counter("db", "poll")), Fence: domain, Wait: "poll"}
}

// dbSeed is the seed's own form of the database lock, polled. Its row has
// no token, so it is never fenced: fence=1 asks for what it cannot give (a
// 400), and a -fence service sells with it unfenced, as with the libraries.
func (d Deps) dbSeed(key string, ttl time.Duration) sale.Method {
	if d.DB == nil {
		return sale.Method{Name: "db-seed", Lock: noDB{}, Wait: "poll"}
	}
	g := dblock.NewSeed(d.DB, dblock.Options{Key: key, TTL: ttl})
	return sale.Method{Name: "db-seed", Lock: retry.Poll(g, d.Retry, d.counter("db-seed", "poll")), Wait: "poll"}
}

// dbGetLock is MariaDB's named lock: it waits in the server (GET_LOCK),
// one attempt per acquisition; its token is a counter row bumped inside
// the hold.
func (d Deps) dbGetLock(key string, fence bool, domain string) sale.Method {
	m := sale.Method{Name: "db-getlock", Lock: noDB{}, Fence: domain, Wait: "server"}
	if d.DBHolds != nil {
		m.Lock = counted{dblock.NewGetLock(d.DBHolds, dblock.GetLockOptions{Key: key, Fence: fence}), d.counter("db-getlock", "server")}
	}
	return m
}

// ErrNoDB is the db versions' error when the service has no database.
var ErrNoDB = errors.New("builder: no database configured (-db)")

type noDB struct{}

func (noDB) Acquire(context.Context, string) (lease.Lease, error) { return nil, ErrNoDB }

// ErrNoZK is the zk version's error when the service has no ZooKeeper.
var ErrNoZK = errors.New("builder: no ZooKeeper ensemble configured (-zk)")

type noZK struct{}

func (noZK) Acquire(context.Context, string) (lease.Lease, error) { return nil, ErrNoZK }

// ErrNoEtcd is the etcd version's error when the service has no etcd
// client.
var ErrNoEtcd = errors.New("builder: no etcd cluster configured (-etcd)")

type noEtcd struct{}

func (noEtcd) Acquire(context.Context, string) (lease.Lease, error) { return nil, ErrNoEtcd }

// counter reports lock's attempts, waiting as wait says, to the observer.
func (d Deps) counter(lock, wait string) retry.Counter {
	if d.Observer == nil {
		return nil
	}
	return func(n int) { d.Observer.Attempts(lock, wait, n) }
}
