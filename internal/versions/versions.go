// Package versions is the catalogue of lock versions, in the tutorial's order:
// the names the -lock flag accepts, what each adds and what it still gets
// wrong, and how each is built. The service, the load test and the report all
// read it from here, so a version is described in exactly one place.
package versions

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/locks/redlock"
	"github.com/locklab/locklab/internal/locks/retry"
	mutex "github.com/locklab/locklab/internal/locks/v1_mutex"
	setnx "github.com/locklab/locklab/internal/locks/v3_setnx"
	lua "github.com/locklab/locklab/internal/locks/v6_lua"
	reentrant "github.com/locklab/locklab/internal/locks/v7_reentrant"
	watchdog "github.com/locklab/locklab/internal/locks/v8_watchdog"
	"github.com/locklab/locklab/internal/sale"
	"github.com/redis/go-redis/v9"
)

// Version describes one lock version.
type Version struct {
	Name  string
	Guard string // the mechanism, in a few words
	Fixes string // what it adds over the version before
	Flaw  string // what it still gets wrong
	// NotCopied names the tutorial bug this version does not repeat, if any.
	NotCopied string
	// Safe says whether it is expected never to oversell under the default
	// load test (a crash, a pause or a slow holder aside).
	Safe bool
}

// All lists every version in the tutorial's order.
var All = []Version{
	{Name: "none", Guard: "no lock", Fixes: "nothing: the baseline",
		Flaw: "GET then SET is a read-modify-write: overlapping sales sell the same unit twice"},
	{Name: "v1", Guard: "sync.Mutex in the process", Fixes: "races between goroutines of one process",
		Flaw: "no effect across processes: two replicas oversell"},
	{Name: "v2", Guard: "v1, deployed as two replicas behind nginx", Fixes: "nothing: the deployment is the lesson",
		Flaw: "as v1: each replica locks only itself"},
	{Name: "v3", Guard: "SETNX, no expiry, poll every -retry, DEL", Fixes: "exclusion across replicas",
		Flaw: "a holder that dies never releases: every later sale waits (deadlock)", Safe: true},
	{Name: "v4", Guard: "SET NX EX in one command, DEL", Fixes: "the crash deadlock: the lock expires",
		Flaw: "work longer than the TTL: the lock expires, and the slow holder's DEL deletes its successor's lock", Safe: true},
	{Name: "v5", Guard: "v4 + release = GET, compare owner, DEL", Fixes: "deleting another owner's lock (mostly)",
		Flaw: "GET and DEL are two commands: the lock can change hands between them", Safe: true},
	{Name: "v6", Guard: "v4 + Lua compare-and-delete release", Fixes: "atomic owner-checked release",
		Flaw:      "not reentrant: a nested acquisition waits on itself; work longer than the TTL still loses the lock",
		NotCopied: "the tutorial's script calls get(KEYS[1] == ARGV[1]), which errors on every run, so it never releases", Safe: true},
	{Name: "v7", Guard: "hash lock, owner -> hold count, Lua acquire and release", Fixes: "reentrancy",
		Flaw:      "work longer than the TTL still loses the lock",
		NotCopied: "the tutorial sends a time.Duration to EXPIRE: 20 s becomes 20,000,000,000 s; this sends PEXPIRE in ms", Safe: true},
	{Name: "v8", Guard: "v7 + watchdog renewing every TTL/3", Fixes: "lease loss while the holder is alive and working",
		Flaw:      "one Redis node is a single point of failure; a frozen process freezes its watchdog too",
		NotCopied: "the tutorial's watchdog blocks forever on its own channel, is never stopped and starts again on every nested Lock", Safe: true},
	{Name: "redlock", Guard: "go-redsync over independent nodes, quorum N/2+1", Fixes: "one node's failure",
		Flaw:      "relies on timing: a holder paused past the TTL writes after its successor (Kleppmann)",
		NotCopied: "the tutorial builds clients per request, ignores the lock error and sells anyway", Safe: true},
	{Name: "atomic", Guard: "no lock: one Lua script checks and decrements", Fixes: "the race itself, with no lock to lose",
		Flaw: "fits one-key steps only; work that spans services still needs a lock (and fencing)", Safe: true},
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

// Deps are what the guards are built from.
type Deps struct {
	Redis   *redis.Client           // the single-node locks' Redis (and the stock's)
	Redlock []redis.UniversalClient // the independent Redlock nodes
	LockKey string                  // the tutorial's inventoryRedisLock
	TTL     time.Duration
	Retry   time.Duration // mean wait between attempts, single-node locks
	// RedlockRetry is redlock's: each attempt is a round trip to every node
	// (and a release on all of them when it fails), so it polls less often.
	RedlockRetry time.Duration
	// Fence makes every lock that can (v3 to v8, redlock) hand out fencing
	// tokens, and the sale's write refuse stale ones.
	Fence bool
	// Notify, when set, makes v3 to v8 wait for published releases instead
	// of polling every Retry (-wait notify). redlock polls either way: its
	// release is go-redsync's, which publishes nothing.
	Notify *retry.Notifier
	Log    *slog.Logger
}

// Waits are the -wait choices: poll (the tutorial's, the default) and notify.
var Waits = []string{"poll", "notify"}

// Build returns one sale.Method per version, each with its own guard, the v8
// watchdog (for its counters), and a function that stops what the guards run
// in the background (watchdogs).
func Build(d Deps) (map[string]sale.Method, *watchdog.Locker, func()) {
	hash := reentrant.Options{Key: d.LockKey, TTL: d.TTL, Retry: d.Retry, Notify: d.Notify}
	v8 := watchdog.New(d.Redis, hash, d.Log.With("lock", "v8"))
	methods := map[string]sale.Method{
		"none":    {Name: "none"},
		"v1":      {Name: "v1", Guard: mutex.New()},
		"v2":      {Name: "v2", Guard: mutex.New()},
		"v3":      {Name: "v3", Guard: setnx.New(d.Redis, setnx.Options{Key: d.LockKey, Retry: d.Retry, Notify: d.Notify})},
		"v4":      {Name: "v4", Guard: setnx.New(d.Redis, setnx.Options{Key: d.LockKey, TTL: d.TTL, Retry: d.Retry, Notify: d.Notify})},
		"v5":      {Name: "v5", Guard: setnx.New(d.Redis, setnx.Options{Key: d.LockKey, TTL: d.TTL, Retry: d.Retry, OwnerCheck: true, Notify: d.Notify})},
		"v6":      {Name: "v6", Guard: lua.New(d.Redis, d.LockKey, d.TTL, d.Retry).WithNotify(d.Notify)},
		"v7":      {Name: "v7", Guard: reentrant.New(d.Redis, hash), Nested: true},
		"v8":      {Name: "v8", Guard: v8, Nested: true},
		"redlock": {Name: "redlock", Guard: redlock.New(d.Redlock, redlock.Options{Key: d.LockKey, TTL: d.TTL, Retry: d.RedlockRetry})},
		"atomic":  {Name: "atomic", Atomic: true},
	}
	wait := "poll"
	if d.Notify != nil {
		wait = "notify"
	}
	for name, m := range methods {
		switch name {
		case "v3", "v4", "v5", "v6", "v7", "v8":
			m.Wait = wait
		case "redlock":
			m.Wait = "poll"
		}
		methods[name] = m
	}
	if d.Fence {
		for name, m := range methods {
			if _, ok := m.Guard.(sale.FencedGuard); ok {
				m.Fence = true
				methods[name] = m
			}
		}
	}
	return methods, v8, v8.Close
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
