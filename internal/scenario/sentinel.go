package scenario

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/reason"
)

// promotionLimit bounds how long Sentinel may take to promote a standby once
// the primary is killed: its down-after (1 s on the local cluster), the
// sentinels' agreement and vote, the promotion.
const promotionLimit = 20 * time.Second

// sentinelPoll is how often the cell asks the sentinels: their view changes
// in steps of their 1 s pings and INFOs.
const sentinelPoll = 50 * time.Millisecond

// failoverSentinel (seed 004's problem 4, with Sentinel deciding): the
// lock's node has two asynchronous standbys and three sentinels watching it,
// and the replicas reach it through the primary the sentinels name. Both
// standbys' replication links stall (each replicates through its own fault
// proxy, which drops every byte). Holder A, on replica 1, takes the lock and
// stops itself right before its write, holding it (the pass runs with a
// lease longer than a failover, 15 s, and the cell checks that B came within
// A's lease, or is "not tested": the failover outlasted it). The primary is killed;
// nothing else is done by hand: the cell waits until the sentinels name a
// standby as the primary, and every replica's client follows them there.
// Sale B, on replica 2, finds no lock on the promoted standby and takes it
// while A still holds its lease: two holders, v6's and v8's alike (v8's
// watchdog is A's, stopped with it). With replica_ack=1 A's acquisition
// waits for a standby's acknowledgement, does not get it within 500 ms and
// gives the lock up (503) before it would have stopped: one holder only. The
// cell checks that it was the acknowledgement that stopped A (a WAIT reached
// the node, A never stopped, the stock untouched: gaveUpForAck), not
// something else that failed; if not, or if B came only after A's lease, it
// is "not tested" and says why.
//
// Afterwards the old primary comes back, empty, is made a replica of the
// promoted standby and caught up, and Sentinel is told to fail over to it
// (SENTINEL FAILOVER, the operator's failback), the other standby kept out
// of the choice by being frozen until the sentinel counts it down; then both
// standbys replicate through their proxies again (Sentinel points replicas
// at the primary's own address in a failover).
func failoverSentinel(ack bool) runFunc {
	return func(ctx context.Context, e Env, lock string, before int64) (observed, detail string, err error) {
		if len(e.Standbys) < 2 { // Sentinel and the fault proxies: Run checked them (Unfit)
			return "", "", errors.New("failover-sentinel needs two standbys: a cluster started with SENTINEL=1")
		}
		sentinels := e.sentinelClients()
		defer func() {
			for _, s := range sentinels {
				err = errors.Join(err, s.Close())
			}
		}()
		if err := e.primaryIs(ctx, sentinels, e.StockAddr); err != nil {
			return "", "", notUndone(e.StockNode, LeftFailedOver, err)
		}
		var heals []func() error
		healAll := func() (err error) { // each heal runs once, however often this is called
			for _, h := range heals {
				err = also(err, h())
			}
			return err
		}
		defer func() { err = also(err, healAll()) }()
		for _, sb := range e.Standbys {
			if err := e.linkThroughProxy(ctx, sb); err != nil {
				return "", "", err
			}
			heal, err := e.cut(sb.Name, e.StockNode) // its replication link stalls
			if err != nil {
				return "", "", err
			}
			heals = append(heals, heal)
		}
		hooks := "stop_before_write=1"
		if ack {
			hooks = "replica_ack=1&" + hooks
		}
		waits, err := calls(ctx, e.Redis, "wait")
		if err != nil {
			return "", "", err
		}
		aSent := time.Now()
		a := e.sellAt(ctx, e.Replicas[0].URL, lock, hooks)
		thaw := e.thaw(e.Replicas[0].Name) // it stops itself
		defer func() {
			err = also(err, thaw())
			if a != nil { // whatever failed, A answers before the cell ends
				<-a
			}
		}()
		var ra reply
		if werr := e.waitUntil(ctx, 10*time.Second, func() (bool, error) {
			select {
			case ra = <-a:
				a = nil
				return true, nil
			default:
				return e.Procs.Stopped(e.Replicas[0].Name)
			}
		}); werr != nil {
			return "", "", fmt.Errorf("the first sale neither stopped before its write nor answered: %w", werr)
		}
		if a == nil { // A answered without stopping: it gave the lock up, or failed
			if ra.err != nil {
				return "", "", ra.err
			}
			if !ack {
				return "", "", fmt.Errorf("the first sale answered %s without stopping before its write", ra)
			}
			why, err := e.ackStopped(ctx, ra, waits, before)
			if err != nil || why.Text != "" {
				return notTested(why), "reply " + ra.String(), err
			}
			e.mark(reason.New("gaveUpNoStandby", "{node} gave the lock up: no standby acknowledged it", "node", e.Replicas[0].Name))
		} else {
			e.mark(reason.New("stoppedHolding", "{node} stopped before its write, holding the lock", "node", e.Replicas[0].Name))
		}
		restartPrimary, err := e.Procs.Kill(e.StockNode)
		if err != nil {
			return "", "", err
		}
		killed := time.Now()
		e.mark(reason.New("primaryKilled", "{node} (primary) killed", "node", e.StockNode))
		defer func() {
			// The failback gets its own time: the cell's deadline may be
			// what ended it, and the cluster must be left as it was.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			defer cancel()
			err = also(err, healAll()) // the standbys catch up through their proxies in the failback
			err = errors.Join(err, e.sentinelFailBack(fctx, sentinels, restartPrimary))
		}()
		var promoted Standby
		if werr := waitEvery(ctx, promotionLimit, sentinelPoll, func() (bool, error) {
			addr, err := sentinels[0].GetMasterAddrByName(ctx, e.SentinelMaster).Result()
			if err != nil {
				return false, nil // a sentinel busy failing over may not answer at once
			}
			i := slices.IndexFunc(e.Standbys, func(sb Standby) bool { return sb.Addr == net.JoinHostPort(addr[0], addr[1]) })
			if i >= 0 {
				promoted = e.Standbys[i]
			}
			return i >= 0, nil
		}); werr != nil {
			return "", "", fmt.Errorf("Sentinel promoted no standby within %s of the primary's death: %w", promotionLimit, werr)
		}
		e.mark(reason.New("sentinelPromoted", "Sentinel promoted {node} ({after} after the kill)", "node", promoted.Name, "after", time.Since(killed).Round(100*time.Millisecond)))
		if err := healAll(); err != nil { // the links led to the dead primary: nothing more to keep from the standbys
			return "", "", err
		}
		rb, tries, err := e.sellOnPromoted(ctx, lock)
		if err != nil {
			return "", "", err
		}
		if a != nil && time.Since(aSent) >= e.TTL { // A took the lock after aSent: its lease ended after aSent + TTL
			return notTested(reason.New("pastLease", "sale B answered {after} after A's sale was sent, past A's lease (-ttl {ttl}): any overlap would be the lease's, not the failover's; give the replicas a longer -ttl", "after", time.Since(aSent).Round(time.Millisecond), "ttl", e.TTL)), "", nil
		}
		if a != nil {
			e.mark(reason.New("resumed", "{node} resumed", "node", e.Replicas[0].Name))
			if err := thaw(); err != nil {
				return "", "", err
			}
			ra, a = <-a, nil
		}
		if err := errors.Join(ra.err, rb.err); err != nil {
			return "", "", err
		}
		after, err := promoted.Redis.Get(ctx, e.StockKey).Int64()
		if err != nil {
			return "", "", err
		}
		detail = fmt.Sprintf("replies %s, %s (B's try %d); stock %d -> %d on the standby Sentinel promoted", ra, rb, tries, before, after)
		return byHistory, detail, nil
	}
}

// ackStopped says why A, which answered ra without selling, did not give
// the lock up for want of an acknowledgement ("" when it did): gaveUpForAck
// on the stock's node's WAITs since there were waits, and its stock since it
// was before.
func (e Env) ackStopped(ctx context.Context, ra reply, waits, before int64) (reason.Reason, error) {
	n, err1 := calls(ctx, e.Redis, "wait")
	stock, err2 := e.Redis.Get(ctx, e.StockKey).Int64()
	if err := errors.Join(err1, err2); err != nil {
		return reason.Reason{}, err
	}
	return gaveUpForAck(ra, n > waits, before-stock), nil
}

// gaveUpForAck is the +ack cells' precondition: A, asked to wait for a
// standby's acknowledgement of its lock, gave the lock up for want of one.
// It says why not ("" when it did): A answered 503, a WAIT reached the
// stock's node meanwhile (waited), and A took nothing from the stock
// (wrote, the units it went down by). A 503 for another reason (the lock
// not obtained, a node unreachable) tested nothing about the
// acknowledgement.
func gaveUpForAck(ra reply, waited bool, wrote int64) reason.Reason {
	switch {
	case ra.status != http.StatusServiceUnavailable:
		return reason.New("neitherHeldNorGaveUp", "the first sale answered {reply}: it neither held the lock through the fault nor gave it up for want of an acknowledgement", "reply", ra)
	case !waited:
		return reason.New("noWait", "the first sale answered {reply}, but no WAIT reached the stock's node: something other than the acknowledgement stopped it", "reply", ra)
	case wrote != 0:
		return reason.New("itWrote", "the first sale answered {reply}, but the stock went down by {n}: it wrote", "reply", ra, "n", wrote)
	}
	return reason.Reason{}
}

// sellOnPromoted is sale B, on replica 2, once its client has found the
// promoted primary: until then (a connection to the dead primary, the
// sentinels' answer not yet changed) the sale fails with a clean 503
// unavailable, and it is sent again, up to 40 times 250 ms apart. A sale
// that failed so never held the lock; one that never reached the promoted
// standby is the cell's error.
func (e Env) sellOnPromoted(ctx context.Context, lock string) (r reply, tries int, err error) {
	for tries = 1; ; tries++ {
		if r = <-e.sellAt(ctx, e.Replicas[1].URL, lock, ""); r.err != nil || r.code != api.CodeUnavailable {
			return r, tries, r.err
		}
		if tries == 40 {
			return r, tries, fmt.Errorf("sale B found no primary in %d tries, 250 ms apart: its replica's client never followed the sentinels", tries)
		}
		select {
		case <-ctx.Done():
			return r, tries, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
