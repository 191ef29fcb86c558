// Package versions is the catalogue of lock versions, in the tutorial's order:
// the names the -lock flag accepts, what each adds and what it still gets
// wrong, and how each is built. The service, the load test and the report all
// read it from here, so a version is described in exactly one place.
package versions

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
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
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Version describes one lock version.
type Version struct {
	Name  string `json:"name"`
	Guard string `json:"guard"` // the mechanism, in a few words
	Fixes string `json:"fixes"` // what it adds over the version before
	Flaw  string `json:"flaw"`  // what it still gets wrong
	// NotCopied names the tutorial bug this version does not repeat, if any.
	NotCopied string `json:"not_copied,omitempty"`
	// Safe says whether it is expected never to oversell under the default
	// load test (a crash, a pause or a slow holder aside).
	Safe bool `json:"safe"`
	// Wait says that it waits for a taken lock as -wait says (v3-v8):
	// polled, notified or handed off.
	Wait bool `json:"wait,omitempty"`
	// Needs names the server a version runs on that a replica may be
	// started without: "db" (-db) or "zk" (-zk); its /healthz setting of
	// that name says whether it has one.
	Needs string `json:"needs,omitempty"`
	// Waits is how a version that waits its own way (not -wait) waits for
	// a taken lock: "poll", "watch" (etcd's, ZooKeeper's), "server" (in
	// the database, db-getlock's GET_LOCK) or "invalidation"
	// (told by Redis' client-side caching); empty for one that never waits
	// on another process (none, v1, v2, atomic).
	Waits string `json:"waits,omitempty"`
	// Library is the Go module of a lock library people use instead of
	// writing one, used here as its README shows (empty: ours): the bench
	// sets our hand-off against these, and the docs judge them as ours.
	Library string `json:"library,omitempty"`
	// LostWakeup, when set, is a measured lost wake-up: a waiter left
	// parked with the lock free until its deadline. A liveness finding of a
	// library, not ours to fix: the load tests count such a waiter's 503
	// instead of failing, and the lost-wakeup cell expects it at a rate.
	LostWakeup string `json:"lost_wakeup,omitempty"`
	// NoToken says that it hands out no fencing token (a library that has
	// none, the seed's database lock): its fenced cells cannot be fixed by
	// the stock's check, and it is never built fenced (a fenced sale with no
	// token is refused: sale.ErrNoToken).
	NoToken bool `json:"no_token,omitempty"`
	// NoLease says that its hold never runs out by itself while its holder
	// lives (db-getlock's connection): a frozen holder keeps it, and
	// pause-holder shows every other sale waiting for it.
	NoLease bool `json:"no_lease,omitempty"`
	// OneReplica says that the tutorial runs it on one process: the load
	// test sends its sales to one replica (v1; v2 is the same code on two).
	OneReplica bool `json:"one_replica,omitempty"`
	// Lesson is how the lab shows the flaw on demand.
	Lesson Lesson `json:"lesson"`
}

// Lesson reproduces a version's flaw: a scenario cell (Scenario, for this
// version), and the cell that shows the fix when one does (Fix); or, with
// no scenario, a load run of the versions in Run.
//
// Base is the version whose code this one's lesson is shown against: the
// lab shows the lines marked for this version (package lesson) as a diff
// against the lines marked for Base; empty: shown whole, a new family.
type Lesson struct {
	Scenario string   `json:"scenario,omitempty"`
	Fix      string   `json:"fix,omitempty"`
	Run      []string `json:"run,omitempty"`
	Base     string   `json:"base,omitempty"`
}

// All lists every version in the tutorial's order, read from versions.json:
// the catalogue is prose, kept as data.
var All = mustParse(catalogue)

//go:embed versions.json
var catalogue []byte

func mustParse(raw []byte) []Version {
	var all []Version
	if err := json.Unmarshal(raw, &all); err != nil {
		panic("versions: versions.json: " + err.Error())
	}
	return all
}

// Fences says whether v can hand out fencing tokens (built with
// Variant.Fence, its sales are fenced): a lock held in another process (one
// that waits on it, as -wait says or its own way) that has a token. The
// others (no lock, a process mutex, the atomic script, NoToken) would
// refuse every fenced sale: asking them to fence tests nothing.
func (v Version) Fences() bool { return (v.Wait || v.Waits != "") && !v.NoToken }

// Fencing lists the versions that fence, in order.
func Fencing() []string {
	var names []string
	for _, v := range All {
		if v.Fences() {
			names = append(names, v.Name)
		}
	}
	return names
}

// Names lists every version name in order.
func Names() []string {
	names := make([]string, len(All))
	for i, v := range All {
		names[i] = v.Name
	}
	return names
}

// Lookup returns the version called name.
func Lookup(name string) (Version, bool) {
	for _, v := range All {
		if v.Name == name {
			return v, true
		}
	}
	return Version{}, false
}

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

// Waits are the -wait choices: poll (the tutorial's, the default), notify
// (queued, the release wakes the first waiter, who tries) and handoff (queued,
// the release hands the lock to the first waiter).
var Waits = []string{"poll", "notify", "handoff"}

// Queued says whether wait queues its waiters in Redis and needs a
// Notifier.
func Queued(wait string) bool { return wait == "notify" || wait == "handoff" }

// Variant is one way of building every version: how v3-v8 wait for a taken
// lock (one of Waits; redlock always polls, v1 and v2 wait in the process),
// and whether the locks that can (v3-v8, redlock) hand out fencing tokens.
// Lease, when set, is the lease of every version that has one in place of
// Deps.TTL: the lab's lessons step a sale by hand, and their lease must be
// one a learner can watch run out (server.LessonLease).
type Variant struct {
	Wait  string
	Fence bool
	Lease time.Duration
}

// Build returns one sale.Method per version, built as v says.
func Build(d Deps, v Variant) map[string]sale.Method {
	d = d.withDefaults()
	if Queued(v.Wait) && d.Notifier == nil {
		panic("versions: Wait " + v.Wait + " needs Deps.Notifier")
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
			m.Lock = retry.Handoff(g, d.Notifier, d.counter(name, v.Wait))
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
func BuildAll(d Deps, variants []Variant) map[Variant]map[string]sale.Method {
	all := make(map[Variant]map[string]sale.Method, len(variants))
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

// Needs names the service's setting version runs on, as /healthz reports
// it ("db": the database, -db; "zk": the ZooKeeper ensemble, -zk), or ""
// when it needs neither: a replica reporting "false" for it cannot run it.
func Needs(version string) string {
	v, _ := Lookup(version)
	return v.Needs
}

// Missing is why the versions in locks that need a setting the replicas
// report "false" for (settings, from /healthz) cannot run there ("" when
// all can), and those versions.
func Missing(locks []string, settings map[string]string) (why string, missing []string) {
	var needs []string
	for _, l := range locks {
		if n := Needs(l); n != "" && settings[n] == "false" {
			missing = append(missing, l)
			if !slices.Contains(needs, n) {
				needs = append(needs, n)
			}
		}
	}
	if len(missing) == 0 {
		return "", nil
	}
	what := map[string]string{"db": "no database (-db)", "zk": "no ZooKeeper ensemble (-zk)"}
	var parts []string
	for _, n := range needs {
		parts = append(parts, what[n])
	}
	return fmt.Sprintf("%s: the replicas have %s; the local cluster (make up) has them", strings.Join(missing, ", "), strings.Join(parts, " and ")), missing
}

// NeedsDB says whether version runs on the service's database (-db).
func NeedsDB(version string) bool { return Needs(version) == "db" }

// ErrNoDB is the db versions' error when the service has no database.
var ErrNoDB = errors.New("versions: no database configured (-db)")

type noDB struct{}

func (noDB) Acquire(context.Context, string) (lease.Lease, error) { return nil, ErrNoDB }

// NeedsZK says whether version runs on the service's ZooKeeper (-zk).
func NeedsZK(version string) bool { return Needs(version) == "zk" }

// ErrNoZK is the zk version's error when the service has no ZooKeeper.
var ErrNoZK = errors.New("versions: no ZooKeeper ensemble configured (-zk)")

type noZK struct{}

func (noZK) Acquire(context.Context, string) (lease.Lease, error) { return nil, ErrNoZK }

// ErrNoEtcd is the etcd version's error when the service has no etcd
// client.
var ErrNoEtcd = errors.New("versions: no etcd cluster configured (-etcd)")

type noEtcd struct{}

func (noEtcd) Acquire(context.Context, string) (lease.Lease, error) { return nil, ErrNoEtcd }

// counter reports lock's attempts, waiting as wait says, to the observer.
func (d Deps) counter(lock, wait string) retry.Counter {
	if d.Observer == nil {
		return nil
	}
	return func(n int) { d.Observer.Attempts(lock, wait, n) }
}

// Markdown renders the catalogue as the README's versions table.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| `-lock` | guard | fixes | still gets wrong | tutorial bug not copied |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, v := range All {
		notCopied := v.NotCopied
		if notCopied == "" {
			notCopied = "-"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", v.Name, v.Guard, v.Fixes, v.Flaw, notCopied)
	}
	return b.String()
}

// Summary renders the catalogue as the README's table: a row a version,
// what it adds, what still breaks it, what shows that (its lesson), and a
// link to its section of docs (a path relative to the README).
func Summary(docs string) string {
	var b strings.Builder
	b.WriteString("| version | adds | still breaks it | shown by |\n|---|---|---|---|\n")
	for _, v := range All {
		shown := "a run of " + strings.Join(v.Lesson.Run, " and ")
		if v.Lesson.Scenario != "" {
			shown = "`" + v.Lesson.Scenario + "`"
			if v.Lesson.Fix != "" {
				shown += "; fixed: `" + v.Lesson.Fix + "`"
			}
		}
		fmt.Fprintf(&b, "| [`%s`](%s#%s) | %s | %s | %s |\n", v.Name, docs, v.Name, v.Fixes, v.Flaw, shown)
	}
	return b.String()
}
