// Package scenario makes each version's flaw happen on demand against a
// running cluster, and measures what happened: it does not assume it. Each
// scenario drives sales through the service's fault hooks (-chaos) and watches
// the lock key in Redis to know when to act: it waits on observable state (the
// lock appearing, the lease expiring), never on a guessed sleep. Every
// ordering it relies on has half a lease of margin on each side.
package scenario

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/checker"
	"github.com/locklab/locklab/internal/cluster"
	"github.com/locklab/locklab/internal/history"
	"github.com/locklab/locklab/internal/versions"
	"github.com/redis/go-redis/v9"
)

// Outcomes, as the tables print them.
const (
	Oversell         = "oversell"
	NoOversell       = "no oversell"
	ForeignDelete    = "oversell, deletes successor's lock"
	NoForeignDelete  = "oversell, keeps successor's lock"
	DeletesSuccessor = "deletes successor's lock"
	KeepsSuccessor   = "keeps successor's lock"
	WaitsOnItself    = "waits on itself"
	Passes           = "passes"
	StaleRefused     = "no oversell, stale write refused"
	Deadlock         = "waits until its deadline (deadlock)"
	Clean503         = "clean 503s, stock unchanged"
	KeepsSelling     = "keeps selling, no oversell"
	StopsBeforeWrite = "stops before its write, no oversell"
	Resumes          = "resumes after the lease, no oversell"
	WaitsForHolder   = "every sale waits until the holder resumes, no oversell"
	ResumesAtOnce    = "resumes at once, no oversell"
	ConfirmedLost    = "a confirmed sale lost"
	NoConfirmedLost  = "no confirmed sale lost"
)

// NotTested begins the observation of a cell whose precondition did not
// happen (the holder was never paused while holding, the successor gave up
// before the lease ran out, the acknowledgement was not what stopped the
// sale): the cell tested nothing, and says why after it. It is never a
// pass, whatever was expected: Cell.OK is false for it.
const NotTested = "not tested: "

// notTested is the observation of a cell whose precondition did not happen.
func notTested(why string) string { return NotTested + why }

// Scenario is one fault and what each version is expected to do under it.
type Scenario struct {
	Name     string `json:"name"`
	Injected string `json:"injected"`
	// Requirement names the tutorial's requirement of a lock this scenario
	// tests, as the lab's "what to use" table titles its column (empty: not
	// a column there).
	Requirement string            `json:"requirement,omitempty"`
	Expect      map[string]string `json:"expect"` // version -> expected outcome; the versions it applies to
	// NeedsProcs says that it freezes or kills processes: it needs Env.Procs.
	NeedsProcs bool `json:"needs_procs"`
	// NeedsFaults says that it cuts or delays the network: it needs
	// Env.Faults.
	NeedsFaults bool `json:"needs_faults,omitempty"`
	// NeedsSentinel says that it runs on a cluster whose stock node Redis
	// Sentinel watches (SENTINEL=1), and only there: every other scenario
	// runs where no Sentinel would fail the node over under it.
	NeedsSentinel bool `json:"needs_sentinel,omitempty"`
	// OutwaitsLease says that its second sale must be able to wait past
	// the first one's lease: the replicas' -acquire-timeout must be longer
	// than their -ttl, or the cell could only see the successor give up.
	OutwaitsLease bool `json:"outwaits_lease,omitempty"`
	// LocalOnly says why it runs on the local cluster only ("": it runs
	// on Compose too, unless it needs the fault proxies).
	LocalOnly string `json:"local_only,omitempty"`
	run       runFunc
}

// Unfit says why s cannot run against e ("": it can): the fault proxies it
// needs, the Sentinel topology it needs or must not have, or an acquire
// deadline too short for its successor to outwait the lease (it could not
// mean anything: refused before any fault). make scenarios runs its matrix
// in two passes, without Sentinel and with it.
func (s Scenario) Unfit(e Env) string {
	switch {
	case s.NeedsFaults && e.Faults == nil:
		return "needs the fault proxies: a local cluster started with FAULTS=1 (make scenarios starts one)"
	case s.NeedsSentinel && len(e.Sentinels) == 0:
		return "needs Redis Sentinel watching the stock's node: a local cluster started with SENTINEL=1 FAULTS=1 (make scenarios' second pass)"
	case !s.NeedsSentinel && len(e.Sentinels) > 0:
		return "runs on a cluster without Sentinel (make scenarios' first pass): here Sentinel would fail the stock's node over under it"
	}
	return s.Refuses(e)
}

// Refuses says why s, run against e, could mean nothing ("": it could):
// its successor must outwait the first sale's lease, and the replicas'
// acquire deadline is not longer than it. Unfit includes it; unlike the
// other reasons, which only say the cell belongs to another pass, it is
// an error even where a whole matrix runs.
func (s Scenario) Refuses(e Env) string {
	if s.OutwaitsLease && e.AcquireTimeout <= e.TTL {
		return fmt.Sprintf("needs its second sale to wait past the first one's lease, but the replicas' -acquire-timeout (%s) is not longer than their -ttl (%s): raise INVENTORY_ACQUIRE_TIMEOUT above INVENTORY_TTL", e.AcquireTimeout, e.TTL)
	}
	return ""
}

// OnCompose reports whether s runs against the Compose stack, and if not,
// why.
func (s Scenario) OnCompose() (bool, string) {
	switch {
	case s.NeedsFaults:
		return false, "needs the fault proxies and the clock shim (FAULTS=1), which only the local cluster has"
	case s.LocalOnly != "":
		return false, s.LocalOnly
	}
	return true, ""
}

// runFunc makes a scenario happen to lock, with the lock key gone and the
// stock set to before, and says what it observed.
type runFunc func(ctx context.Context, e Env, lock string, before int64) (observed, detail string, err error)

// Cell is one scenario run against one version.
type Cell struct {
	Scenario string `json:"scenario"`
	Lock     string `json:"lock"`
	Expected string `json:"expected"`
	Observed string `json:"observed"`
	Detail   string `json:"detail"`
	// TwoHolders and LostUpdates are the checker's counts over the cell's
	// sales, from the replicas' history; Evidence says how they contradict
	// the observed outcome ("" when they agree).
	TwoHolders  int    `json:"two_holders"`
	LostUpdates int    `json:"lost_updates"`
	Evidence    string `json:"evidence,omitempty"`
	// Sales and Marks are the cell's evidence for its timeline: its sales
	// as the replicas recorded them, and the faults it injected.
	Sales   []history.Sale  `json:"-"`
	Marks   []history.Mark  `json:"marks,omitempty"`
	Verdict checker.Verdict `json:"-"`
}

// OK reports whether the observation matched the expectation, and the
// history agrees with it. A cell that tested nothing is never OK.
func (c Cell) OK() bool { return c.Expected == c.Observed && c.Evidence == "" && !c.NotTested() }

// NotTested reports whether the cell's precondition did not happen: its
// observation says "not tested" and why.
func (c Cell) NotTested() bool { return strings.HasPrefix(c.Observed, NotTested) }

// All lists the scenarios: what each injects and what each version is
// expected to do, read from scenarios.json (prose, kept as data), each bound
// to the code that makes it happen.
var All = bind(catalogue, map[string]runFunc{
	"slow-holder":            slowHolder(false),
	"slow-holder+fence":      slowHolder(true),
	"lost-lease":             lostLease,
	"release-race":           releaseRace,
	"crash-holder":           crashHolder,
	"dead-waiter-handoff":    deadWaiter("handoff"),
	"dead-waiter-notify":     deadWaiter("notify"),
	"node-down":              nodeDown,
	"majority-down":          majorityDown,
	"partition-holder":       partitionHolder(false),
	"partition-holder+fence": partitionHolder(true),
	"delayed-write":          delayedWrite(false),
	"delayed-write+fence":    delayedWrite(true),
	"clock-jump":             clockJump(false),
	"clock-jump+fence":       clockJump(true),
	"failover":               failover(false),
	"failover+ack":           failover(true),
	"failover-write":         failoverWrite(false),
	"failover-write+ack":     failoverWrite(true),
	"failover-sentinel":      failoverSentinel(false),
	"failover-sentinel+ack":  failoverSentinel(true),
	"redlock-restart":        redlockRestart(noFix),
	"redlock-restart+delay":  redlockRestart(delayRestart),
	"redlock-restart+fsync":  redlockRestart(fsyncAlways),
	"pause-holder":           pauseHolder(false),
	"pause-holder+fence":     pauseHolder(true),
	"reentry":                reentry,
	"lost-wakeup":            lostWakeup,
})

//go:embed scenarios.json
var catalogue []byte

// bind parses the catalogue and gives each scenario its run.
func bind(raw []byte, runs map[string]runFunc) []Scenario {
	var all []Scenario
	if err := json.Unmarshal(raw, &all); err != nil {
		panic("scenario: scenarios.json: " + err.Error())
	}
	for i, s := range all {
		if all[i].run = runs[s.Name]; all[i].run == nil {
			panic("scenario: no code for " + s.Name)
		}
	}
	if len(all) != len(runs) {
		panic("scenario: scenarios.json and the code disagree on the scenarios")
	}
	return all
}

// Names lists the scenarios' names, in order.
func Names() []string {
	var names []string
	for _, s := range All {
		names = append(names, s.Name)
	}
	return names
}

// Run runs s against lock and compares.
func (s Scenario) Run(ctx context.Context, e Env, lock string) (Cell, error) {
	c := Cell{Scenario: s.Name, Lock: lock, Expected: s.Expect[lock]}
	e.lock = lock
	if s.NeedsProcs && e.Procs == nil {
		return c, fmt.Errorf("%s needs control of the cluster's processes (the local cluster's run directory)", s.Name)
	}
	if why := s.Unfit(e); why != "" {
		return c, fmt.Errorf("%s %s", s.Name, why)
	}
	var start time.Time
	again := ""
	for {
		before, err := e.reset(ctx)
		if err != nil {
			return c, err
		}
		start = time.Now()
		e.cell, e.seq, e.marks = "cell-"+history.RunID(), new(atomic.Int64), &marks{}
		c.Observed, c.Detail, err = s.run(ctx, e, lock, before)
		if errors.Is(err, errStranded) && again == "" { // once: a second stranding is the cell's error
			again = fmt.Sprintf("; ran again: in its first run (%s), %v", e.cell, err)
			continue
		}
		if err != nil {
			return c, err
		}
		break
	}
	c.Detail += again
	c.Marks = e.marks.list
	v, sales, err := e.evidence(ctx, start)
	if err != nil {
		return c, err
	}
	c.Sales, c.Verdict, c.TwoHolders, c.LostUpdates = sales, v, v.TwoHolders, v.LostUpdates
	if c.Observed == byHistory {
		c.Observed = historyOutcome(v.TwoHolders)
	}
	c.Detail += fmt.Sprintf("; history: %d two holders, %d lost updates", c.TwoHolders, c.LostUpdates)
	for _, s := range sales {
		if s.ReleaseError != "" { // its key stays where the release did not reach, until its lease ends
			c.Detail += fmt.Sprintf(", %s's release failed (%s)", s.Replica, s.ReleaseError)
		}
	}
	c.Evidence = agrees(c.Observed, v)
	return c, nil
}

// agrees says how the checker's verdict on a cell's sales contradicts its
// observed outcome, or "" when it does not. Who overlapped whom is the lesson
// itself: an oversell shows two holders at once and a lost update; a version
// that kept its sales apart shows neither; fencing shows the two holders and
// no lost update.
func agrees(observed string, v checker.Verdict) string {
	switch {
	case observed == Oversell || observed == ForeignDelete || observed == NoForeignDelete:
		if v.TwoHolders == 0 || v.LostUpdates == 0 {
			return "an oversell, but the history shows no two holders or no lost update"
		}
	case observed == NoOversell && (v.TwoHolders != 0 || v.LostUpdates != 0):
		return "no oversell, but the history shows two holders or a lost update"
	case observed == NoTwoHolders && v.LostUpdates != 0:
		return "no two holders, but the history shows a lost update"
	case observed == StaleRefused && (v.TwoHolders == 0 || v.LostUpdates != 0):
		return "a refused stale write, but the history does not show two holders without a lost update"
	case (observed == AllWoken || observed == Stranded || observed == StrandsCleanly) && (v.TwoHolders != 0 || v.LostUpdates != 0):
		return "nothing oversold, but the history shows two holders or a lost update"
	case observed == StopsBeforeWrite && v.LostUpdates != 0:
		return "stopped before its write, but the history shows a lost update"
	}
	return ""
}

// evidence reads both replicas' record of the cell's sales and checks it.
func (e Env) evidence(ctx context.Context, since time.Time) (checker.Verdict, []history.Sale, error) {
	var sales []history.Sale
	for _, r := range e.Replicas {
		got, err := history.Fetch(ctx, e.Client, strings.TrimSuffix(r.URL, "/sale")+"/history", e.AdminToken, since, e.cell)
		if err != nil {
			return checker.Verdict{}, nil, fmt.Errorf("scenario: the replicas' history: %w", err)
		}
		sales = append(sales, got...)
	}
	return checker.Check(checker.Run{Sales: sales}), sales, nil
}

// slowHolder: S sells with hold 1.5 x TTL. Once S holds the lock, B comes in
// with hold 1 x TTL. Where the lease can expire under S (v4 to v7), B gets the
// lock at about TTL, reads the stock before S writes it, and holds the lock
// when S releases at 1.5 x TTL: S's blind DEL (v4) removes B's lock, an owner
// check (v5 on) leaves it; both sell the same unit. Under v8 the watchdog
// keeps S's lease, B waits, and the sales run one after the other. With
// fencing (slow-holder+fence) the stale holder writes first, after B has
// read: the stock refuses S (412) and only B sells.
func slowHolder(fenced bool) runFunc {
	return func(ctx context.Context, e Env, lock string, before int64) (string, string, error) {
		return slowHeld(ctx, e, lock, before, fenced)
	}
}

func slowHeld(ctx context.Context, e Env, lock string, before int64, fenced bool) (string, string, error) {
	fence := "&" + fenceHook(fenced)
	s := e.sell(ctx, lock, "hold="+(e.TTL*3/2).String()+fence)
	if err := e.waitLock(ctx, true, 5*time.Second); err != nil {
		// The lock was free (reset freed it, and no other sale was sent).
		if losesWakeups(lock) && stranded(lock, <-s) {
			return "", "", fmt.Errorf("the slow sale %w", errStranded)
		}
		return "", "", fmt.Errorf("the slow sale never took the lock: %w", err)
	}
	b := e.sell(ctx, lock, "hold="+e.TTL.String()+fence)
	rs, held, rb, err := e.lockAfterFirst(ctx, s, b)
	if err != nil {
		return "", "", err
	}
	oversold, detail, err := e.oversold(ctx, before, rs, rb)
	if err != nil {
		return "", "", err
	}
	return slowVerdict(oversold, held, rs, rb, e.TTL), detail, nil
}

// slowVerdict judges slow-holder from the first sale's reply rs, the second's
// rb, the units oversold and whether a lock was held when the first sale
// answered. Its precondition is that B waited past A's lease (the lease was
// at most ttl, and B was sent once A held the lock), or sold: a B that gave
// up sooner could never have overlapped A, and "no oversell" would say
// nothing about the lock.
func slowVerdict(oversold, held int64, rs, rb reply, ttl time.Duration) string {
	switch {
	case oversold == 0 && rb.outcome != api.Sold && rb.elapsed < ttl:
		return notTested(fmt.Sprintf("B answered %s after %s, before A's %s lease ran out: raise INVENTORY_ACQUIRE_TIMEOUT above INVENTORY_TTL",
			rb, rb.elapsed.Round(time.Millisecond), ttl))
	case oversold == 0 && rs.code == api.CodeFenced:
		return StaleRefused
	case oversold == 0:
		return NoOversell
	case held == 0:
		return ForeignDelete
	default:
		return NoForeignDelete
	}
}

// releaseRace: S sells with release_pause 1.5 x TTL: its lease expires during
// the pause. B then takes the lock (hold 1 x TTL) and holds it when S's pause
// ends. v5 already read its own value before the pause, so its DEL removes
// B's lock; v6 compares and deletes in one step and leaves it.
func releaseRace(ctx context.Context, e Env, lock string, _ int64) (string, string, error) {
	s := e.sell(ctx, lock, "release_pause="+(e.TTL*3/2).String())
	if err := e.waitLock(ctx, true, 5*time.Second); err != nil {
		return "", "", fmt.Errorf("the first sale never took the lock: %w", err)
	}
	if err := e.waitLock(ctx, false, 3*e.TTL); err != nil {
		return "", "", fmt.Errorf("the first sale's lease never expired during its release pause: %w", err)
	}
	b := e.sell(ctx, lock, "hold="+e.TTL.String())
	if err := e.waitLock(ctx, true, e.TTL/2); err != nil {
		return "", "", fmt.Errorf("the successor did not take the lock within half a lease: %w", err)
	}
	rs, held, rb, err := e.lockAfterFirst(ctx, s, b)
	if err != nil {
		return "", "", err
	}
	detail := fmt.Sprintf("first sale %d %s; successor %d", rs.status, rs.warning, rb.status)
	if held == 0 {
		return DeletesSuccessor, detail, nil
	}
	return KeepsSuccessor, detail, nil
}

// crashHolder: S, on replica 1, takes the lock and works for 2 x TTL; once
// it holds the lock the replica is killed (a longer hold would change
// nothing, and on Compose's 2 s lease it would pass the hooks' 5 s cap). B, on replica 2, then wants the lock: with no expiry
// (v3) nobody will ever release it and B waits until its deadline; with one,
// B gets it once the lease runs out and sells. Replica 1 is started again.
func crashHolder(ctx context.Context, e Env, lock string, before int64) (observed, detail string, err error) {
	s := e.sellAt(ctx, e.Replicas[0].URL, lock, "hold="+(2*e.TTL).String())
	if err := e.waitLock(ctx, true, 5*time.Second); err != nil {
		return "", "", fmt.Errorf("the first sale never took the lock: %w", err)
	}
	restart, err := e.Procs.Kill(e.Replicas[0].Name)
	if err != nil {
		return "", "", err
	}
	restart = restarted(e.Replicas[0].Name, restart)
	e.mark(e.Replicas[0].Name + " killed")
	defer func() { err = errors.Join(err, restart(ctx)) }() // whatever happens, the replica comes back
	<-s                                                     // its connection died with the replica
	rb := <-e.sellAt(ctx, e.Replicas[1].URL, lock, "")
	if rb.err != nil {
		return "", "", rb.err
	}
	oversold, detail, err := e.oversold(ctx, before, rb)
	detail += fmt.Sprintf(", the next sale answered in %s", rb.elapsed.Round(time.Millisecond))
	switch {
	case err != nil:
		return "", "", err
	case rb.code == api.CodeLockTimeout:
		return Deadlock, detail, nil
	case rb.status == http.StatusOK && oversold == 0 && noLease(lock) && rb.elapsed < e.TTL/2:
		return ResumesAtOnce, detail, nil // its hold ended with the holder's connection
	case rb.status == http.StatusOK && oversold == 0:
		return Resumes, detail, nil
	}
	return "unexpected reply", detail, nil
}

// nodeDown: with the single-node locks' node not answering, every sale must
// fail cleanly (503 unavailable, nothing sold, the stock as it was once the
// node is back); with one of redlock's three nodes dead, or etcd's leader,
// ten concurrent sales must still go through on the others, without
// oversell (etcd elects a new leader meanwhile).
func nodeDown(ctx context.Context, e Env, lock string, before int64) (observed, detail string, err error) {
	switch lock {
	case "redlock", "etcd", "zk":
		victim := e.SpareNodes[len(e.SpareNodes)-1]
		switch lock {
		case "etcd":
			if victim, err = e.etcdLeader(ctx); err != nil {
				return "", "", err
			}
		case "zk":
			if victim, err = e.zkLeader(); err != nil {
				return "", "", err
			}
		}
		restarts, err := e.kill(victim)
		if err != nil {
			return "", "", err
		}
		defer func() { err = errors.Join(err, restarts(ctx)) }()
		elected := ""
		if lock != "redlock" {
			// A request whose proposal went to the dead leader is lost with
			// it and waits for its deadline (etcd retries nothing): the
			// sales start once the others have elected a new one.
			start := time.Now()
			if err := e.waitUntil(ctx, 20*time.Second, func() (bool, error) { return e.elected(ctx, lock, victim), nil }); err != nil {
				return "", "", fmt.Errorf("%s elected no new leader after %s was killed: %w", lock, victim, err)
			}
			e.mark(lock + " elected a new leader")
			elected = fmt.Sprintf(", %s (the leader) killed, a new leader in %s", victim, time.Since(start).Round(10*time.Millisecond))
		}
		replies := e.fire(ctx, lock, 10)
		oversold, detail, err := e.oversold(ctx, before, replies...)
		detail += elected
		if err != nil {
			return "", "", err
		}
		if oversold == 0 && slices.IndexFunc(replies, func(r reply) bool { return r.status != http.StatusOK }) < 0 {
			return KeepsSelling, detail, nil
		}
		return fmt.Sprintf("oversold %d", oversold), detail, nil
	}
	node := e.StockNode // the single-node locks' node, the stock's too
	if versions.NeedsDB(lock) {
		node = e.DBNode // the database: the stock is elsewhere, and stays reachable
	}
	thaw, err := e.freeze(node)
	if err != nil {
		return "", "", err
	}
	e.mark(node + " frozen")
	defer func() { err = also(err, thaw()) }()
	replies := e.fire(ctx, lock, 5)
	if err := thaw(); err != nil {
		return "", "", err
	}
	return e.clean503(ctx, before, replies)
}

// majorityDown: two of the lock's three nodes killed (redlock: the two only
// it uses; etcd: two members, so the third has no quorum). No sale may go
// through: each answers 503, redlock's at once (no quorum of SETs), etcd's
// at its acquire deadline (a member with no quorum never answers), and the
// stock is as it was.
func majorityDown(ctx context.Context, e Env, lock string, before int64) (observed, detail string, err error) {
	victims := e.SpareNodes
	switch lock {
	case "etcd":
		victims = []string{e.EtcdMembers[1].Name, e.EtcdMembers[2].Name}
	case "zk":
		victims = []string{e.ZKMembers[1].Name, e.ZKMembers[2].Name}
	}
	restarts, err := e.kill(victims...)
	if err != nil {
		return "", "", err
	}
	defer func() { err = errors.Join(err, restarts(ctx)) }()
	return e.clean503(ctx, before, e.fire(ctx, lock, 5))
}

// fire sends n sales of lock at once and returns their replies.
func (e Env) fire(ctx context.Context, lock string, n int) []reply {
	chans := make([]<-chan reply, n)
	for i := range chans {
		chans[i] = e.sell(ctx, lock, "")
	}
	replies := make([]reply, n)
	for i, ch := range chans {
		replies[i] = <-ch
	}
	return replies
}

// clean503 is Clean503 when every reply was a 503 that sold nothing (the
// lock's node unavailable, or the lock not obtained by the deadline) and the
// stock is as it was before.
func (e Env) clean503(ctx context.Context, before int64, replies []reply) (string, string, error) {
	after, err := e.Redis.Get(ctx, e.StockKey).Int64()
	if err != nil {
		return "", "", err
	}
	clean, codes := 0, map[string]int{}
	for _, r := range replies {
		if r.err == nil && (r.code == api.CodeUnavailable || r.code == api.CodeLockTimeout) {
			clean++
		}
		codes[fmt.Sprintf("%d %s", r.status, r.code)]++
	}
	detail := fmt.Sprintf("%d of %d replies clean 503s %v, stock %d -> %d", clean, len(replies), codes, before, after)
	if clean == len(replies) && after == before {
		return Clean503, detail, nil
	}
	return "not clean", detail, nil
}

// kill kills the named processes, marks it on the timeline, and returns
// what starts them again (each waits until its process answers).
func (e Env) kill(names ...string) (restart func(context.Context) error, err error) {
	var restarts []func(context.Context) error
	restart = func(ctx context.Context) error {
		var errs []error
		for _, r := range restarts {
			errs = append(errs, r(ctx))
		}
		return errors.Join(errs...)
	}
	for _, name := range names {
		r, err := e.Procs.Kill(name)
		if err != nil {
			return nil, errors.Join(err, restart(context.Background()))
		}
		restarts = append(restarts, restarted(name, r))
		e.mark(name + " killed")
	}
	return restart, nil
}

// etcdElected reports whether the members other than gone have elected one
// of themselves leader.
func (e Env) etcdElected(ctx context.Context, gone string) bool {
	ids, leaders := map[uint64]bool{}, map[uint64]bool{}
	for _, m := range e.EtcdMembers {
		if m.Name == gone {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		st, err := e.Etcd.Status(sctx, m.Addr)
		cancel()
		if err == nil {
			ids[st.Header.MemberId], leaders[st.Leader] = true, true
		}
	}
	for id := range leaders {
		if ids[id] {
			return true
		}
	}
	return false
}

// elected reports whether the lock's members (etcd's or ZooKeeper's) other
// than gone have elected one of them leader.
func (e Env) elected(ctx context.Context, lock, gone string) bool {
	if lock == "etcd" {
		return e.etcdElected(ctx, gone)
	}
	for _, m := range e.ZKMembers {
		if mode, err := cluster.ZKMode(m.Addr, time.Second); m.Name != gone && err == nil && mode == "leader" {
			return true
		}
	}
	return false
}

// zkLeader is the process name of ZooKeeper's current leader.
func (e Env) zkLeader() (string, error) {
	for _, m := range e.ZKMembers {
		mode, err := cluster.ZKMode(m.Addr, time.Second)
		if err != nil {
			return "", fmt.Errorf("scenario: zookeeper %s: %w", m.Name, err)
		}
		if mode == "leader" {
			return m.Name, nil
		}
	}
	return "", errors.New("scenario: zookeeper has no leader")
}

// etcdLeader is the process name of etcd's current leader.
func (e Env) etcdLeader(ctx context.Context) (string, error) {
	for _, m := range e.EtcdMembers {
		st, err := e.Etcd.Status(ctx, m.Addr)
		if err != nil {
			return "", fmt.Errorf("scenario: etcd %s: %w", m.Name, err)
		}
		if st.Header.MemberId == st.Leader {
			return m.Name, nil
		}
	}
	return "", errors.New("scenario: etcd has no leader")
}

// pauseHolder: S, on replica 1, takes the lock, reads the stock, makes every
// check it makes (v8: the lease is not known lost), and then its whole
// process stops (SIGSTOP, by its stop_before_write hook), watchdog and all:
// Kleppmann's GC pause between the check and the write. Once the lease has
// expired, B, on replica 2, takes the lock and sells; replica 1 resumes and S
// writes what it read before. Without fencing both sell the same unit; with
// it the stock refuses S's stale write (412). The pause is placed after the
// check on purpose: a pause during the work is caught when the watchdog wakes
// before the sale does, and missed when the sale wakes first; no check in
// the process can catch one after it.
func pauseHolder(fenced bool) runFunc {
	return func(ctx context.Context, e Env, lock string, before int64) (string, string, error) {
		return pausedHolder(ctx, e, lock, before, fenced)
	}
}

func pausedHolder(ctx context.Context, e Env, lock string, before int64, fenced bool) (observed, detail string, err error) {
	fence := fenceHook(fenced)
	s := e.sellAt(ctx, e.Replicas[0].URL, lock, "stop_before_write=1&"+fence)
	thaw := e.thaw(e.Replicas[0].Name)         // it stops itself
	defer func() { err = also(err, thaw()) }() // whatever happens, the replica runs again (also if it stopped late)
	stopped := func() (bool, error) { return e.Procs.Stopped(e.Replicas[0].Name) }
	if err := e.waitUntil(ctx, 5*time.Second, stopped); err != nil {
		return "", "", fmt.Errorf("the first sale's replica never stopped before its write: %w", err)
	}
	e.mark(e.Replicas[0].Name + " stopped before its write")
	if noLease(lock) {
		return e.pausedForever(ctx, lock, before, fence, s, thaw)
	}
	if err := e.waitLock(ctx, false, 3*e.TTL); err != nil {
		return "", "", fmt.Errorf("the frozen holder's lease never expired: %w", err)
	}
	rb := <-e.sellAt(ctx, e.Replicas[1].URL, lock, fence)
	if rb.err != nil {
		return "", "", rb.err
	}
	e.mark(e.Replicas[0].Name + " resumed")
	if err := thaw(); err != nil {
		return "", "", err
	}
	rs := <-s
	if stranded(lock, rb) { // sent once the frozen holder's key had vanished: the lock was free
		return "", "", fmt.Errorf("the second sale %w", errStranded)
	}
	observed, detail, err = e.verdict(ctx, before, rs, rb)
	if err != nil || observed != NoOversell || rs.code != api.CodeFenced {
		return observed, detail, err
	}
	return StaleRefused, detail, nil
}

// noLease says that lock's hold never runs out while its holder lives.
func noLease(lock string) bool {
	v, _ := versions.Lookup(lock)
	return v.NoLease
}

// pausedForever is pause-holder for a lock with no lease (db-getlock): the
// frozen holder keeps it, so the second sale, sent while it is frozen, must
// still be waiting after twice the TTL (any lease would have run out), be
// served only after the holder resumes, sells its unit, and releases.
func (e Env) pausedForever(ctx context.Context, lock string, before int64, fence string, s <-chan reply, thaw func() error) (string, string, error) {
	second := e.sellAt(ctx, e.Replicas[1].URL, lock, fence)
	select {
	case rb := <-second:
		_ = thaw()
		rs := <-s
		observed, detail, err := e.verdict(ctx, before, rs, rb)
		return observed, detail + ", the second sale answered " + rb.String() + " while the holder was frozen", err
	case <-time.After(2 * e.TTL): // past any lease: the second sale still waits
	}
	held, err := e.locked(ctx)
	if err != nil {
		return "", "", err
	}
	resumed := time.Now()
	e.mark(e.Replicas[0].Name + " resumed")
	if err := thaw(); err != nil {
		return "", "", err
	}
	rs, rb := <-s, <-second
	observed, detail, err := e.verdict(ctx, before, rs, rb)
	detail += fmt.Sprintf(", the second sale still waiting %s into the pause (the lock held: %v), answered %s after the holder resumed",
		2*e.TTL, held, time.Since(resumed).Round(time.Millisecond))
	if err != nil || observed != NoOversell || !held || rs.outcome != api.Sold || rb.outcome != api.Sold {
		return observed, detail, err
	}
	return WaitsForHolder, detail, nil
}

// lostLease: S sells with hold 1.5 x TTL. Once S holds the lock and has read
// the stock, the lock's key vanishes from its node (the scenario deletes it:
// a node that restarts without persistence, or fails over to a replica that
// missed the key, forgets it the same way). B then takes the lock and sells.
// v7 never learns that it lost the lock: S writes what it read, and both sell
// the same unit. v8's watchdog finds the lease gone at its next renewal
// (within TTL/3) and closes the lease's Lost channel; the sale checks it
// before writing, so S stops (503 lease_lost) a whole TTL before its write.
func lostLease(ctx context.Context, e Env, lock string, before int64) (string, string, error) {
	reads, err := e.getCalls(ctx)
	if err != nil {
		return "", "", err
	}
	s := e.sell(ctx, lock, "hold="+(e.TTL*3/2).String())
	if err := e.waitRead(ctx, reads); err != nil {
		return "", "", err
	}
	if err := e.Redis.Del(ctx, e.lockKeys(lock)...).Err(); err != nil {
		return "", "", err
	}
	e.mark("the lock's key vanishes")
	rb := <-e.sell(ctx, lock, "")
	rs := <-s
	observed, detail, err := e.verdict(ctx, before, rs, rb)
	if err != nil || observed != NoOversell || rs.code != api.CodeLeaseLost || rb.outcome != api.Sold {
		return observed, detail, err
	}
	return StopsBeforeWrite, detail + ", the slow sale answered " + rs.code, nil
}

// waitRead waits until the lock is held and the stock's node has served more
// than reads GETs: the holder has read the stock.
func (e Env) waitRead(ctx context.Context, reads int64) error {
	if err := e.waitLock(ctx, true, 5*time.Second); err != nil {
		return fmt.Errorf("the first sale never took the lock: %w", err)
	}
	if err := e.waitUntil(ctx, 5*time.Second, func() (bool, error) {
		n, err := e.getCalls(ctx)
		return n > reads, err
	}); err != nil {
		return fmt.Errorf("the first sale never read the stock: %w", err)
	}
	return nil
}

// freeze freezes the named process and returns what thaws it, once however
// often it is called.
func (e Env) freeze(name string) (thaw func() error, err error) {
	if err := e.Procs.Freeze(name, true); err != nil {
		return nil, err
	}
	return e.thaw(name), nil
}

// thaw resumes the named process, once however often it is called.
func (e Env) thaw(name string) func() error {
	return sync.OnceValue(func() error { return notUndone(name, LeftFrozen, e.Procs.Freeze(name, false)) })
}

// getCalls is how many GETs the stock's node has served.
func (e Env) getCalls(ctx context.Context) (int64, error) {
	return calls(ctx, e.Redis, "get")
}

// calls is how many times node has served the command cmd (lower case)
// since it started.
func calls(ctx context.Context, node *redis.Client, cmd string) (int64, error) {
	info, err := node.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	stat := infoField(info, "cmdstat_"+cmd)
	if stat == "" {
		return 0, nil // none served yet
	}
	var n int64
	_, err = fmt.Sscanf(stat, "calls=%d", &n)
	return n, err
}

// fenceHook is the /sale hook that turns fencing on or off for one sale.
func fenceHook(fenced bool) string {
	if fenced {
		return "fence=1"
	}
	return "fence=0"
}

// infoField is field's value in a reply of Redis's INFO ("" when absent).
func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// reentry: one sale that takes the lock twice, nested. A lock that is not
// reentrant makes the inner acquisition wait on the outer one, which only its
// own release could end: so it waits until its acquire deadline (a 503) or, if
// the lease is the shorter, until its own lease expires, and then sells with
// the outer hold lost (a 200 with the service's lease warning).
func reentry(ctx context.Context, e Env, lock string, _ int64) (string, string, error) {
	r := <-e.sell(ctx, lock, "nested=1")
	if r.err != nil {
		return "", "", r.err
	}
	switch {
	case r.code == api.CodeLockTimeout:
		return WaitsOnItself, fmt.Sprintf("503 lock_timeout after %s", r.elapsed.Round(time.Millisecond)), nil
	case r.status == http.StatusOK && r.warning != "" && r.elapsed >= e.TTL:
		return WaitsOnItself, fmt.Sprintf("waited %s for its own lease (%s) to expire, then sold with the lock lost",
			r.elapsed.Round(time.Millisecond), e.TTL), nil
	case r.status == http.StatusOK && r.warning == "":
		return Passes, fmt.Sprintf("200 in %s", r.elapsed.Round(time.Millisecond)), nil
	}
	return "unexpected reply", fmt.Sprintf("%d %s %s", r.status, r.code, r.warning), nil
}

// MatrixRow is one version's cells across the scenarios, in All's order;
// a scenario that does not apply to the version has a nil cell.
type MatrixRow struct {
	Lock  string
	Cells []*Cell
}

// Matrix arranges cells as versions (in the given order) by scenarios,
// leaving out versions no cell is about.
func Matrix(cells []Cell, locks []string) []MatrixRow {
	var rows []MatrixRow
	for _, lock := range locks {
		row := MatrixRow{Lock: lock, Cells: make([]*Cell, len(All))}
		found := false
		for i, s := range All {
			for j := range cells {
				if cells[j].Scenario == s.Name && cells[j].Lock == lock {
					row.Cells[i], found = &cells[j], true
				}
			}
		}
		if found {
			rows = append(rows, row)
		}
	}
	return rows
}
