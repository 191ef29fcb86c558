package scenario

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/locklab/locklab/internal/versions"
)

// Held are the outcomes that say a fix held: one holder, no oversell, no
// lost update, a stale write refused, a waiter served. A cell expected to
// hold is shown able to fail by its mutation.
var Held = []string{NoOversell, StaleRefused, KeepsSuccessor, Passes, Resumes, ResumesAtOnce, WaitsForHolder, KeepsSelling, Clean503,
	StopsBeforeWrite, NoTwoHolders, NoConfirmedLost, MovesOn, AllWoken, StrandsCleanly}

// A Mutation is a cell expected to hold, run again with the fix that holds
// it switched off. It must then show the flaw: a cell that still holds with
// its fix off could never have failed, and its "held" proves nothing.
type Mutation struct {
	Scenario string `json:"scenario"` // the held cell's
	Lock     string `json:"lock"`
	Fix      string `json:"fix"` // the fix switched off, in words
	// Runs and As are what runs: the cell's own scenario and lock, or the
	// version before the fix (v7 for v8's watchdog) or the scenario's own
	// run without it (redlock-restart for +delay).
	Runs string `json:"runs"`
	As   string `json:"as"`
	Off  string `json:"off,omitempty"` // the sales' off= hook (chaos.Off), "" none
	// Flaw is the outcome the fix is there to stop, where a cell names it:
	// the unfixed sibling's expectation (the scenario without its +fix, for
	// the version run: slow-holder's v4 for slow-holder+fence's), when that
	// expectation is a flaw. The mutation must then observe exactly it, not
	// any outcome short of holding. "" when the sibling is expected to hold
	// too, or there is none (dead-waiter, lost-wakeup): any flaw shows.
	Flaw string `json:"flaw,omitempty"`
	// Missing says why the cell has no switch yet ("" when it has one): it
	// is shown as a gap, never as a pass.
	Missing string `json:"missing,omitempty"`
}

// Mutations are the mutations of s's cells for locks: one per cell expected
// to hold.
func Mutations(s Scenario, locks []string) []Mutation {
	var ms []Mutation
	for _, lock := range locks {
		if exp, ok := s.Expect[lock]; ok && slices.Contains(Held, exp) && !storeDown(s, lock) {
			ms = append(ms, mutation(s, lock, exp))
		}
	}
	return ms
}

// storeDown reports the cells whose "clean 503s, stock unchanged" is the
// stock's own node down (node-down, the single-node Redis locks: the
// lock's node is the stock's): no sale could change the stock whatever the
// lock did, so the cell claims nothing of the lock's, and there is no fix
// to switch off.
func storeDown(s Scenario, lock string) bool {
	return s.Name == "node-down" && s.Expect[lock] == Clean503 && !versions.NeedsDB(lock)
}

// previous are the tutorial's versions, each the one before its fix.
var previous = map[string]struct{ version, fix string }{
	"v5": {"v4", "the owner check (v4)"},
	"v6": {"v5", "the atomic release (v5)"},
	"v7": {"v6", "reentrancy (v6)"},
	"v8": {"v7", "the watchdog (v7)"},
}

// mutation is the switch for one held cell: the fix its outcome rests on,
// switched off.
func mutation(s Scenario, lock, expected string) Mutation {
	m := Mutation{Scenario: s.Name, Lock: lock, Runs: s.Name, As: lock}
	base := func(name string) bool { return s.Name == name || s.Name == name+"+fence" }
	switch {
	case expected == StaleRefused:
		m.Fix, m.Off = "fencing: the stock compares no other holder's token", "fence"
	case expected == NoTwoHolders && (s.Name == "failover+ack" || s.Name == "failover-sentinel+ack"):
		m.Fix, m.Off = "the replicas' acknowledgement of the lock", "lock-ack"
	case expected == NoConfirmedLost && s.Name == "failover-write+ack":
		m.Fix, m.Off = "the replicas' acknowledgement of the stock write", "write-ack"
	case s.Name == "redlock-restart+delay":
		m.Fix, m.Runs = "the restarted node's delay (redlock-restart)", "redlock-restart"
	case s.Name == "redlock-restart+fsync":
		m.Fix, m.Runs = "fsync on every write (redlock-restart)", "redlock-restart"
	case base("slow-holder") && lock == "v8": // lost-lease's v8 switches its own check off (below)
		m.Fix, m.As = "the watchdog (v7)", "v7"
		if s.Name == "slow-holder+fence" {
			m.Fix, m.Off = "the watchdog (v7) and fencing", "fence"
		}
	case base("slow-holder") && expected == NoOversell:
		m.Fix, m.Off = "the lock: it grants whoever asks", "lock"
	case expected == StopsBeforeWrite:
		m.Fix, m.Off = "the check of a lost lease before the write", "lease-check"
	case s.Name == "reentry": // v8 is reentrant as v7 is: the fix is v7's
		m.Fix, m.As = "reentrancy (v6)", "v6"
	case s.Name == "release-race":
		if p, ok := previous[lock]; ok {
			m.Fix, m.As = p.fix, p.version
		}
	case s.Name == "crash-holder":
		// A lock whose dead holder's lease never ends: the tutorial's v3
		// (the database family's own, db-seed, for db). The libraries'
		// leases cannot be switched off; the cell's verdict (B's reply) is
		// the same code for every lock.
		m.Fix, m.As = "the lease's expiry (v3)", "v3"
		switch lock {
		case "db":
			m.Fix, m.As = "the hold's expiry (db-seed)", "db-seed"
		case "db-getlock":
			m.Fix, m.As = "the lock going with its holder's connection (db-seed's row stays)", "db-seed"
		}
	case expected == WaitsForHolder:
		m.Fix, m.Off = "the lock: it grants whoever asks", "lock"
	case expected == MovesOn:
		m.Fix, m.Off = "the releaser's check at the claim deadline", "claim"
	case s.Name == "majority-down", s.Name == "node-down":
		m.Fix, m.Off = "the lock: it grants whoever asks", "lock"
	case s.Name == "lost-wakeup":
		v, _ := versions.Lookup(lock)
		m.Fix = "the release's hand-over: the waiters find the free lock only at their own check"
		if !v.Wait {
			m.Fix = wakeFix[lock]
		}
		if m.Fix != "" {
			m.Off = "wake"
		}
	}
	if m.Fix == "" && m.Missing == "" {
		m.Missing = fmt.Sprintf("no switch yet for %q under %s", expected, lock)
	}
	if m.Missing == "" {
		m.Flaw = flaw(m.Runs, m.As)
	}
	return m
}

// flaw is the outcome the unfixed sibling of scenario's cell for lock is
// expected to show (the scenario's name before its "+"), "" when that cell
// does not exist or is expected to hold.
func flaw(scenario, lock string) string {
	sibling, _, _ := strings.Cut(scenario, "+")
	i := slices.IndexFunc(All, func(s Scenario) bool { return s.Name == sibling })
	if i < 0 {
		return ""
	}
	if exp, ok := All[i].Expect[lock]; ok && !slices.Contains(Held, exp) {
		return exp
	}
	return ""
}

// wakeFix is, for each library, what wakes its waiters, which off=wake
// takes away from a request's waiter: a wrapper of the library's real
// client (or its own retry option) that drops the wake-up, never a lock of
// ours in its place.
var wakeFix = map[string]string{
	"etcd": "the watch's event: the deletion of the key just before the waiter's own is dropped, " +
		"so the waiter is never told it is first",
	"zk": "the watch's event: the deletion of the node just before the waiter's own is dropped, " +
		"so the waiter is never told it is first",
	"redislock": "its poll (it has no wake-up: a waiter learns of a release only by asking again): " +
		"a waiter that found the lock taken asks no more until its deadline",
	"rueidislock":   invalidations,
	"rueidislock-1": invalidations,
}

const invalidations = "Redis' invalidations (client-side caching): the library's client drops them, so a waiter " +
	"is told of a release only by its own replica's (the library signals its own waiters)"

// Run runs m's cell with its fix off against e.
func (m Mutation) Run(ctx context.Context, e Env) (Cell, error) {
	i := slices.IndexFunc(All, func(s Scenario) bool { return s.Name == m.Runs })
	if i < 0 {
		return Cell{}, fmt.Errorf("mutation of %s: no scenario %s", m.Scenario, m.Runs)
	}
	if _, ok := All[i].Expect[m.As]; !ok {
		return Cell{}, fmt.Errorf("mutation of %s, %s: %s has no cell for %s", m.Scenario, m.Lock, m.Runs, m.As)
	}
	e.off = m.Off
	return All[i].Run(ctx, e, m.As)
}

// Shows reports whether c, m's run, showed the flaw: it tested something
// (not "not tested"), the history agrees with what it observed, and that is
// m's named flaw, or where none is named no fix holding.
func (m Mutation) Shows(c Cell) bool {
	if c.NotTested() || c.Evidence != "" {
		return false
	}
	if m.Flaw != "" {
		return c.Observed == m.Flaw
	}
	return !slices.Contains(Held, c.Observed)
}
