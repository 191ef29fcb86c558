package scenario

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/history"
	"github.com/locklab/locklab/internal/reason"
	"github.com/locklab/locklab/internal/versions"
)

// The nemesis (-nemesis): a seeded schedule of faults that hits random
// targets while a steady load runs, one fault at a time, each healed before
// the next; the history checker then decides whether anything went wrong.
// Unlike a scenario, it does not arrange an order of events: it finds the
// ones the faults happen to produce.

// Fault kinds.
const (
	FaultPause      = "pause"       // SIGSTOP a replica or a server of a lock (Redis, etcd, ZooKeeper, MariaDB) for For
	FaultKill       = "kill"        // SIGKILL a replica or a server of a lock (never the stock's node), start it again
	FaultPartition  = "partition"   // cut a replica off from a Redis node for For
	FaultDelay      = "delay"       // delay what a replica sends to a node by Latency, for For
	FaultSlowHolder = "slow-holder" // one sale of the load holds the lock for For
	FaultClockJump  = "clock-jump"  // a Redis node's wall clock runs Latency ahead for For
)

// Fault is one entry of a schedule.
type Fault struct {
	At      time.Duration `json:"at"` // after the load started
	Kind    string        `json:"kind"`
	Target  string        `json:"target"` // a process, or replica>node
	For     time.Duration `json:"for"`
	Latency time.Duration `json:"latency,omitempty"` // delay: the latency; clock-jump: the jump
}

func (f Fault) String() string {
	s := fmt.Sprintf("%7.2fs %-11s %-22s for %s", f.At.Seconds(), f.Kind, f.Target, f.For.Round(time.Millisecond))
	switch f.Kind {
	case FaultDelay:
		s += ", latency " + f.Latency.Round(time.Millisecond).String()
	case FaultClockJump:
		s += ", jump " + f.Latency.Round(time.Millisecond).String()
	}
	return s
}

// Schedule draws the faults of a run of length d from seed: the same seed,
// lease, cluster and locks give the same schedule. The targets are the
// processes the locks' sales use (Uses; no locks: every version's, so every
// process of the cluster), so etcd's members, ZooKeeper's and MariaDB are
// faulted when a lock on them runs, and a Redis node only redlock uses only
// when redlock does. Faults start after one lease of load and are spaced
// 0.5-2 leases apart; each kind is equally likely, and its target is drawn
// from those it can hit (the network and clock faults reach the Redis nodes
// only, through the local cluster's fault proxies and clock shim: FAULTS=1).
func (e Env) Schedule(seed uint64, d time.Duration, locks ...string) []Fault {
	if len(locks) == 0 {
		locks = versions.Names()
	}
	r := rand.New(rand.NewPCG(seed, 0x6c6f636b6c6162)) // "locklab"
	replicas := []string{e.Replicas[0].Name, e.Replicas[1].Name}
	var nodes, servers []string // Redis nodes; the other locks' servers
	for _, lock := range locks {
		for _, p := range e.Uses(lock) {
			switch {
			case slices.Contains(replicas, p), slices.Contains(nodes, p), slices.Contains(servers, p):
			case p == e.StockNode || slices.Contains(e.SpareNodes, p):
				nodes = append(nodes, p)
			default:
				servers = append(servers, p)
			}
		}
	}
	kinds := []string{FaultPause, FaultKill, FaultSlowHolder}
	if e.Faults != nil {
		kinds = append(kinds, FaultPartition, FaultDelay, FaultClockJump)
	}
	leases := func(lo, hi float64) time.Duration { // lo to hi leases
		return time.Duration((lo + r.Float64()*(hi-lo)) * float64(e.TTL)).Round(time.Millisecond)
	}
	pick := func(from ...[]string) string {
		all := slices.Concat(from...)
		return all[r.IntN(len(all))]
	}
	// Never the stock's node: it would come back without the stock.
	killable := slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return n == e.StockNode })
	var faults []Fault
	for at := e.TTL; ; {
		f := Fault{At: at, Kind: pick(kinds)}
		switch f.Kind {
		case FaultPause: // a process pause (seed 003's P) hits a replica about half the time
			f.Target, f.For = pick(replicas, replicas, nodes, servers), leases(1.5, 3)
		case FaultKill:
			f.Target = pick(replicas, killable, servers)
		case FaultPartition:
			f.Target, f.For = pick(replicas)+">"+pick(nodes), leases(1.5, 3)
		case FaultDelay:
			f.Target, f.For, f.Latency = pick(replicas)+">"+pick(nodes), leases(2, 4), leases(0.5, 1)
		case FaultSlowHolder:
			f.Target, f.For = SlowHolderTarget, leases(1.5, 2)
		case FaultClockJump:
			f.Target, f.For, f.Latency = pick(nodes), leases(2, 3), 2*e.TTL
		}
		if f.At+f.For+e.TTL > d {
			return faults
		}
		faults = append(faults, f)
		at += f.For + leases(0.5, 2)
	}
}

// SlowHolderTarget is a slow holder's target: the load's own sale.
const SlowHolderTarget = "the load's next sale"

// Uses lists the processes a sale of lock goes through on e's cluster: the
// two replicas (the load spreads over them; v1's goes to one, see Touches),
// the stock's Redis node (every sale reads and writes the stock there, and a
// holder stalled on it outlives its lease as a paused one does), and the
// servers its lock lives on, as the catalogue says: redlock's other Redis
// nodes, etcd's members, ZooKeeper's (Needs "zk"), MariaDB (Needs "db").
func (e Env) Uses(lock string) []string {
	procs := []string{e.Replicas[0].Name, e.Replicas[1].Name, e.StockNode}
	switch {
	case lock == "redlock":
		procs = append(procs, e.SpareNodes...)
	case lock == "etcd":
		for _, m := range e.EtcdMembers {
			procs = append(procs, m.Name)
		}
	case versions.NeedsZK(lock):
		for _, m := range e.ZKMembers {
			procs = append(procs, m.Name)
		}
	case versions.NeedsDB(lock) && e.DBNode != "":
		procs = append(procs, e.DBNode)
	}
	return procs
}

// Touches reports whether f hit one of procs: its process, either end of a
// partition or delay; a slow holder is one of the load's own sales, so it
// touches every run.
func (f Fault) Touches(procs []string) bool {
	if f.Kind == FaultSlowHolder {
		return true
	}
	from, to, _ := strings.Cut(f.Target, ">")
	return slices.Contains(procs, from) || (to != "" && slices.Contains(procs, to))
}

// Touching counts the faults that hit one of procs: the faults a run whose
// sales used procs was put through.
func Touching(faults []Fault, procs []string) int {
	n := 0
	for _, f := range faults {
		if f.Touches(procs) {
			n++
		}
	}
	return n
}

// KilledReplicas are the kills of the faults that hit one of replicas. A
// replica keeps its history in memory: killed, it comes back with none, so
// the sales it served before are missing from the evidence (and its ring,
// not full, does not say so).
func KilledReplicas(faults []Fault, replicas []string) []Fault {
	var killed []Fault
	for _, f := range faults {
		if f.Kind == FaultKill && slices.Contains(replicas, f.Target) {
			killed = append(killed, f)
		}
	}
	return killed
}

// Nemesis runs faults against e, each at start + its At, until they are all
// done or ctx ends, healing each before the next, and returns what it did
// as marks for the timeline. A slow holder is only marked: the load sends it
// (SlowSales), so that its sale is in the evidence like any other. Every
// fault is healed whatever happens.
func (e Env) Nemesis(ctx context.Context, start time.Time, faults []Fault, log func(string)) ([]history.Mark, error) {
	e.marks = &marks{}
	var errs []error
	for _, f := range faults {
		select {
		case <-ctx.Done():
			return e.marks.list, errors.Join(append(errs, ctx.Err())...)
		case <-time.After(time.Until(start.Add(f.At))): // the schedule's own time
		}
		if f.Kind == FaultSlowHolder { // the load sends it: see SlowSales
			e.mark(reason.New("holdsFor", "a sale holds the lock {for}", "for", f.For.Round(time.Millisecond)))
			continue
		}
		if err := e.inject(ctx, f); err != nil { // a fault not made is said, and fails the run
			errs = append(errs, fmt.Errorf("nemesis: %s: %w", strings.TrimSpace(f.String()), err))
			log("nemesis: " + errs[len(errs)-1].Error())
		}
	}
	return e.marks.list, errors.Join(errs...)
}

// inject makes one fault happen and heals it.
func (e Env) inject(ctx context.Context, f Fault) error {
	hold := func() {
		select {
		case <-ctx.Done():
		case <-time.After(f.For):
		}
	}
	switch f.Kind {
	case FaultPause:
		thaw, err := e.freeze(f.Target)
		if err != nil {
			return err
		}
		e.mark(reason.New("paused", "{node} paused", "node", f.Target))
		hold()
		e.mark(reason.New("resumed", "{node} resumed", "node", f.Target))
		return thaw()
	case FaultKill:
		restart, err := e.kill(f.Target)
		if err != nil {
			return err
		}
		return restart(context.WithoutCancel(ctx))
	case FaultPartition, FaultDelay:
		replica, node, _ := strings.Cut(f.Target, ">")
		var heal func() error
		var err error
		if f.Kind == FaultPartition {
			heal, err = e.cut(replica, node)
		} else {
			heal, err = e.delay(replica, node, f.Latency)
		}
		if err != nil {
			return err
		}
		hold()
		return heal()
	case FaultClockJump:
		if err := e.Procs.JumpClock(f.Target, f.Latency); err != nil {
			return err
		}
		e.mark(reason.New("clockAhead", "{node}'s clock {by} ahead", "node", f.Target, "by", f.Latency))
		hold()
		e.mark(reason.New("clockBack", "{node}'s clock back", "node", f.Target))
		return notUndone(f.Target, LeftClockAhead, e.Procs.JumpClock(f.Target, 0))
	}
	return fmt.Errorf("no such fault %q", f.Kind)
}

// NemesisRate is the nemesis load's rate when none is given: steady, and
// low enough that a 5 minute run fits each replica's history (-history 5000).
const NemesisRate = 30

// UnderNemesis runs one version's load while faults hit e, from a free
// lock: load sends it, at rate requests a second, with hooks that make the
// schedule's slow holders (SlowSales: "hold=D" for their request numbers);
// the schedule starts with it, and the faults' marks are returned once both
// have ended (the schedule ends a lease before the load does). The load
// command and the lab both run the nemesis through it.
func (e Env) UnderNemesis(ctx context.Context, lock string, faults []Fault, rate float64, log func(string),
	load func(ctx context.Context, hooks func(n int64) string) error) ([]history.Mark, error) {
	if err := e.ClearLock(ctx, lock); err != nil {
		return nil, err
	}
	slow := SlowSales(faults, rate)
	hooks := func(n int64) string {
		if d, ok := slow[n]; ok {
			return "hold=" + d.String()
		}
		return ""
	}
	start := time.Now()
	nctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type done struct {
		marks []history.Mark
		err   error
	}
	schedule := make(chan done, 1)
	go func() {
		m, err := e.Nemesis(nctx, start, faults, log)
		schedule <- done{m, err}
	}()
	err := load(ctx, hooks)
	if err != nil {
		cancel() // the load failed: heal and stop the schedule now
	}
	d := <-schedule
	return d.marks, errors.Join(err, d.err)
}

// SlowSales maps the load's request numbers to a hold, for a load at rate
// requests per second: the request due at each slow-holder fault's time
// (rounded down to the schedule's) holds the lock for its For.
func SlowSales(faults []Fault, rate float64) map[int64]time.Duration {
	slow := map[int64]time.Duration{}
	for _, f := range faults {
		if f.Kind == FaultSlowHolder {
			slow[int64(f.At.Seconds()*rate)+1] = f.For
		}
	}
	return slow
}
