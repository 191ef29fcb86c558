package scenario

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/redisconn"
	"github.com/redis/go-redis/v9"
)

// promotionLimit bounds how long Sentinel may take to promote a standby once
// the primary is killed: its down-after (1 s on the local cluster), the
// sentinels' agreement and vote, the promotion.
const promotionLimit = 20 * time.Second

// failoverSentinel (seed 004's problem 4, with Sentinel deciding): the
// lock's node has two asynchronous standbys and three sentinels watching it,
// and the replicas reach it through the primary the sentinels name. Both
// standbys' replication links stall (each replicates through its own fault
// proxy, which drops every byte). Holder A, on replica 1, takes the lock
// with a lease longer than any failover (the lease= hook) and stops itself
// right before its write, holding it. The primary is killed; nothing else
// is done by hand: the cell waits until the sentinels name a standby as the
// primary, and every replica's client follows them there. Sale B, on
// replica 2, finds no lock on the promoted standby and takes it while A
// still holds its lease: two holders, v6's and v8's alike (v8's watchdog
// is A's, stopped with it). With replica_ack=1 A's acquisition waits for a
// standby's acknowledgement, does not get it within 500 ms and gives the
// lock up (503): one holder only.
//
// Afterwards the old primary comes back, empty, is made a replica of the
// promoted standby and caught up, and Sentinel is told to fail over to it
// (SENTINEL FAILOVER, the operator's failback), the other standby kept out
// of the choice by being frozen until the sentinels count it down. The next
// cell puts both standbys behind their proxies again: Sentinel re-points
// replicas at the primary's own address after a failover.
func failoverSentinel(ack bool) runFunc {
	return func(ctx context.Context, e Env, lock string, before int64) (observed, detail string, err error) {
		if len(e.Sentinels) == 0 || len(e.Standbys) < 2 || e.Faults == nil {
			return "", "", errors.New("failover-sentinel needs Redis Sentinel, two standbys and the fault proxies: a cluster started with SENTINEL=1 FAULTS=1 (make scenarios' second pass)")
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
		defer func() {
			for _, h := range heals {
				err = also(err, h())
			}
		}()
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
		var a <-chan reply
		var ra reply
		var aSent time.Time
		if ack {
			// A's acquisition waits for a standby and gives up: its reply
			// comes before the failover.
			ra = <-e.sellAt(ctx, e.Replicas[0].URL, lock, "replica_ack=1")
		} else {
			aSent = time.Now()
			a = e.sellAt(ctx, e.Replicas[0].URL, lock, "stop_before_write=1")
			thaw := e.thaw(e.Replicas[0].Name) // it stops itself
			defer func() { err = also(err, thaw()) }()
			if werr := e.waitUntil(ctx, 10*time.Second, func() (bool, error) { return e.Procs.Stopped(e.Replicas[0].Name) }); werr != nil {
				<-a
				return "", "", fmt.Errorf("the first sale never stopped before its write, holding the lock: %w", werr)
			}
			e.mark(e.Replicas[0].Name + " stopped before its write, holding the lock")
			defer func() {
				if a != nil { // whatever failed, A answers before the cell ends
					err = also(err, thaw())
					<-a
				}
			}()
		}
		restartPrimary, err := e.Procs.Kill(e.StockNode)
		if err != nil {
			return "", "", err
		}
		killed := time.Now()
		e.mark(e.StockNode + " (primary) killed")
		defer func() { err = errors.Join(err, e.sentinelFailBack(ctx, sentinels, restartPrimary)) }()
		var promoted Standby
		if werr := e.waitUntil(ctx, promotionLimit, func() (bool, error) {
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
		e.mark(fmt.Sprintf("Sentinel promoted %s (%s after the kill)", promoted.Name, time.Since(killed).Round(100*time.Millisecond)))
		rb, tries, err := e.sellOnPromoted(ctx, lock)
		if err != nil {
			return "", "", err
		}
		if a != nil && time.Since(aSent) >= e.TTL { // A took the lock after aSent: its lease ended after aSent + TTL
			return "", "", fmt.Errorf("sale B answered %s after A's sale was sent, past A's lease (-ttl %s): any overlap would be the lease's, not the failover's; give the replicas a longer -ttl", time.Since(aSent).Round(time.Millisecond), e.TTL)
		}
		if a != nil {
			e.mark(e.Replicas[0].Name + " resumed")
			if err := e.thaw(e.Replicas[0].Name)(); err != nil {
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
		detail = fmt.Sprintf("replies %s, %s (B's try %d); stock %d -> %d on the standby Sentinel promoted",
			strings.TrimSpace(fmt.Sprint(ra.status, " ", ra.code)), strings.TrimSpace(fmt.Sprint(rb.status, " ", rb.code)), tries, before, after)
		return byHistory, detail, nil
	}
}

// sellOnPromoted is sale B, on replica 2, once its client has found the
// promoted primary: until then (a connection to the dead primary, the
// sentinels' answer not yet changed) the sale fails with a clean 503
// unavailable, and it is sent again, up to 20 times 250 ms apart. A sale
// that failed so never held the lock.
func (e Env) sellOnPromoted(ctx context.Context, lock string) (r reply, tries int, err error) {
	for tries = 1; ; tries++ {
		if r = <-e.sellAt(ctx, e.Replicas[1].URL, lock, ""); r.err != nil || r.code != "unavailable" || tries == 20 {
			return r, tries, r.err
		}
		select {
		case <-ctx.Done():
			return r, tries, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// sentinelClients are clients of each sentinel, with the nodes' password.
func (e Env) sentinelClients() []*redis.SentinelClient {
	var cs []*redis.SentinelClient
	for _, addr := range e.Sentinels {
		cs = append(cs, redis.NewSentinelClient(redisconn.Options(addr, e.Redis.Options().Password)))
	}
	return cs
}

// primaryIs waits until every sentinel names addr as the primary, with no
// failover in progress (a sentinel names the promoted replica while it still
// reconfigures the others, and starts no new failover until it is done).
func (e Env) primaryIs(ctx context.Context, sentinels []*redis.SentinelClient, addr string) error {
	var named []string
	err := e.waitUntil(ctx, promotionLimit, func() (bool, error) {
		named = named[:0]
		for _, s := range sentinels {
			a, err := s.GetMasterAddrByName(ctx, e.SentinelMaster).Result()
			if err != nil {
				return false, nil
			}
			m, err := s.Master(ctx, e.SentinelMaster).Result()
			if err != nil || strings.Contains(m["flags"], "failover") {
				return false, nil
			}
			named = append(named, net.JoinHostPort(a[0], a[1]))
		}
		return !slices.ContainsFunc(named, func(n string) bool { return n != addr }), nil
	})
	if err != nil {
		return fmt.Errorf("the sentinels name %v as the primary, not %s: %w", named, addr, err)
	}
	return nil
}

// linkThroughProxy makes the standby replicate from the stock's node through
// its own fault proxy (Sentinel points every replica at the primary's own
// address in a failover), and waits until it has caught up.
func (e Env) linkThroughProxy(ctx context.Context, sb Standby) error {
	host, port, _ := net.SplitHostPort(sb.Link)
	info, err := sb.Redis.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	if infoField(info, "master_host") != host || infoField(info, "master_port") != port {
		if err := sb.Redis.SlaveOf(ctx, host, port).Err(); err != nil {
			return fmt.Errorf("scenario: %s: REPLICAOF its proxy %s: %w", sb.Name, sb.Link, err)
		}
		e.mark(sb.Name + " replicates through its proxy again")
	}
	return e.standbyInSync(ctx, sb)
}

// sentinelFailBack makes the stock's node the primary again after Sentinel
// failed it over: restarted (empty), a replica of the promoted standby until
// it has caught up, then promoted by Sentinel (SENTINEL FAILOVER) with the
// other standby frozen until the sentinel counts it down, so that the old
// primary is the only replica it can choose; once the sentinel's failover to
// the standby has ended (one in progress refuses another).
func (e Env) sentinelFailBack(ctx context.Context, sentinels []*redis.SentinelClient, restartPrimary func(context.Context) error) error {
	fail := func(err error) error { return notUndone(e.StockNode, LeftFailedOver, fmt.Errorf("fail back: %w", err)) }
	if err := restartPrimary(ctx); err != nil {
		return fail(err)
	}
	a, err := sentinels[0].GetMasterAddrByName(ctx, e.SentinelMaster).Result()
	if err != nil {
		return fail(err)
	}
	primary := net.JoinHostPort(a[0], a[1])
	if primary == e.StockAddr {
		return nil // it never failed over
	}
	i := slices.IndexFunc(e.Standbys, func(sb Standby) bool { return sb.Addr == primary })
	if i < 0 {
		return fail(fmt.Errorf("the sentinels name %s, which is no standby", primary))
	}
	promoted, other := e.Standbys[i], e.Standbys[1-i]
	if err := e.Redis.SlaveOf(ctx, a[0], a[1]).Err(); err != nil {
		return fail(err)
	}
	// Caught up: it has everything the promoted standby had when it
	// became its replica (the sentinels' own messages keep moving the
	// offset after that). A full sync: the node came back empty.
	info, err := promoted.Redis.Info(ctx, "replication").Result()
	if err != nil {
		return fail(err)
	}
	had, _ := strconv.ParseInt(infoField(info, "master_repl_offset"), 10, 64)
	if err := e.waitUntil(ctx, 30*time.Second, func() (bool, error) {
		s, err := e.Redis.Info(ctx, "replication").Result()
		if err != nil {
			return false, err
		}
		got, _ := strconv.ParseInt(infoField(s, "slave_repl_offset"), 10, 64)
		return infoField(s, "master_link_status") == "up" && got >= had, nil
	}); err != nil {
		return fail(fmt.Errorf("%s never caught up with %s: %w", e.StockNode, promoted.Name, err))
	}
	e.mark(e.StockNode + " back, a replica of " + promoted.Name)
	if err := e.Procs.Freeze(other.Name, true); err != nil {
		return fail(err)
	}
	thaw := e.thaw(other.Name)
	err = e.waitUntil(ctx, promotionLimit, func() (bool, error) {
		master, err := sentinels[0].Master(ctx, e.SentinelMaster).Result()
		if err != nil {
			return false, err
		}
		if strings.Contains(master["flags"], "failover") { // the failover to the standby has not ended
			return false, nil
		}
		replicas, err := sentinels[0].Replicas(ctx, e.SentinelMaster).Result()
		if err != nil {
			return false, err
		}
		down, ready := false, false
		for _, r := range replicas {
			addr := net.JoinHostPort(r["ip"], r["port"])
			switch {
			case addr == other.Addr:
				down = strings.Contains(r["flags"], "s_down")
			case addr == e.StockAddr:
				ready = !strings.Contains(r["flags"], "down") && !strings.Contains(r["flags"], "disconnected") && r["master-link-status"] == "ok"
			}
		}
		return down && ready, nil
	})
	if err == nil {
		err = sentinels[0].Failover(ctx, e.SentinelMaster).Err()
	}
	if err == nil {
		err = e.primaryIs(ctx, sentinels, e.StockAddr)
	}
	err = errors.Join(err, thaw())
	if err != nil {
		return fail(err)
	}
	e.mark("Sentinel failed back to " + e.StockNode)
	return nil
}
