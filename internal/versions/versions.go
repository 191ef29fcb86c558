// Package versions is the catalogue of lock versions, in the tutorial's order:
// the names the -lock flag accepts, what each adds and what it still gets
// wrong, how it waits, its lesson. The service, the load test, the lab and the
// report all read it from here, so a version is described in exactly one
// place. It imports no lock: internal/builder builds them.
package versions

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Version describes one lock version.
type Version struct {
	Name string `json:"name"`
	// Package is its lock's package under internal/locks (v3_setnx), where
	// its guard, its scripts and its marked lesson lines are; empty for a
	// version with no lock of its own (none, atomic: the sale's own code).
	Package string `json:"package,omitempty"`
	Guard   string `json:"guard"` // the mechanism, in a few words
	Fixes   string `json:"fixes"` // what it adds over the version before
	Flaw    string `json:"flaw"`  // what it still gets wrong
	// Zh is the same three in 简体中文, in the tutorial's own terms (超卖,
	// 误删, 可重入, 看门狗, 红锁, 栅栏令牌): the tutorial is Chinese, and so
	// is README.zh-CN.md's table.
	Zh Words `json:"zh"`
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
	// Lease is how its hold ends by itself: "fixed" (it runs out -ttl after
	// it is taken, nothing renews it: a holder slower than that loses the
	// lock), "renewed" (a watchdog or keep-alive extends it while the
	// holder lives), or empty (no lease: no lock, a process mutex, v3's
	// and db-seed's lock that never expires, db-getlock's connection). The
	// lab marks where a fixed lease ran out under a hold.
	Lease string `json:"lease,omitempty"`
	// NoLease says that its hold never runs out by itself while its holder
	// lives (db-getlock's connection): a frozen holder keeps it, and
	// pause-holder shows every other sale waiting for it.
	NoLease bool `json:"no_lease,omitempty"`
	// Compare sets one of ours beside the libraries in the lab's "what to
	// use" table (our v6 and v8; every Library version is there too).
	Compare bool `json:"compare,omitempty"`
	// OneReplica says that the tutorial runs it on one process: the load
	// test sends its sales to one replica (v1; v2 is the same code on two).
	OneReplica bool `json:"one_replica,omitempty"`
	// Lesson is how the lab shows the flaw on demand.
	Lesson Lesson `json:"lesson"`
}

// Words are a version's guard, fixes and flaw in another language.
type Words struct {
	Guard string `json:"guard"`
	Fixes string `json:"fixes"`
	Flaw  string `json:"flaw"`
	// NotCopied is NotCopied's, set where that is: the lab's lesson shows it.
	NotCopied string `json:"not_copied,omitempty"`
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

// Showcase is the lab's first run, one click on its first screen and the
// versions its run form starts ticked: the tutorial's mutex on two replicas
// (two holders, oversold) beside the Lua lock that fixes it.
var Showcase = []string{"v2", "v6"}

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
// builder.Deps.TTL: the lab's lessons step a sale by hand, and their lease must be
// one a learner can watch run out (server.LessonLease).
type Variant struct {
	Wait  string
	Fence bool
	Lease time.Duration
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

// NeedsZK says whether version runs on the service's ZooKeeper (-zk).
func NeedsZK(version string) bool { return Needs(version) == "zk" }

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

// SummaryZh renders the catalogue as README.zh-CN.md's table, in 简体中文:
// a row a version, its guard, what it adds and what still breaks it, with
// a link to its section of docs (English).
func SummaryZh(docs string) string {
	var b strings.Builder
	b.WriteString("| 版本 | 做法 | 解决了什么 | 仍然存在的问题 |\n|---|---|---|---|\n")
	for _, v := range All {
		fmt.Fprintf(&b, "| [`%s`](%s#%s) | %s | %s | %s |\n", v.Name, docs, v.Name, v.Zh.Guard, v.Zh.Fixes, v.Zh.Flaw)
	}
	return b.String()
}
