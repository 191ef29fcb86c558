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

	"github.com/locklab/locklab/internal/probe"
	"github.com/locklab/locklab/internal/reason"
	"github.com/locklab/locklab/internal/redisconn"
	"github.com/redis/go-redis/v9"
)

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
// reconfigures the others, and starts no new failover until it is done) and
// the same configuration epoch: all have heard of the latest failover, and
// none will act on an older view.
func (e Env) primaryIs(ctx context.Context, sentinels []*redis.SentinelClient, addr string) error {
	var named, epochs []string
	err := waitEvery(ctx, promotionLimit, sentinelPoll, func() (bool, error) {
		named, epochs = named[:0], epochs[:0]
		for _, s := range sentinels {
			a, err := s.GetMasterAddrByName(ctx, e.SentinelMaster).Result()
			if err != nil {
				return false, nil
			}
			m, err := s.Master(ctx, e.SentinelMaster).Result()
			if err != nil || strings.Contains(m["flags"], "failover") {
				return false, nil
			}
			if len(epochs) > 0 && m["config-epoch"] != epochs[0] {
				return false, nil // one has not heard of the latest failover yet
			}
			epochs = append(epochs, m["config-epoch"])
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
		e.mark(reason.New("replicatesAgain", "{node} replicates through its proxy again", "node", sb.Name))
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
		// It never failed over (the cell ended first, or Sentinel did not
		// get there): a sentinel whose failover was tried and aborted
		// starts none again for twice its failover-timeout, unless reset.
		if err := e.resetSentinels(ctx, sentinels); err != nil {
			return fail(err)
		}
		return nil
	}
	i := slices.IndexFunc(e.Standbys, func(sb Standby) bool { return sb.Addr == primary })
	if i < 0 {
		return fail(fmt.Errorf("the sentinels name %s, which is no standby", primary))
	}
	promoted, other := e.Standbys[i], e.Standbys[1-i]
	if err := e.waitUntil(ctx, 5*time.Second, func() (bool, error) { // its pooled connections died with it
		return e.Redis.SlaveOf(ctx, a[0], a[1]).Err() == nil, nil
	}); err != nil {
		return fail(fmt.Errorf("REPLICAOF %s on %s: %w", primary, e.StockNode, err))
	}
	// Caught up: it has everything the promoted standby had when it
	// became its replica (the sentinels' own messages keep moving the
	// offset after that). A full sync: the node came back empty.
	var had int64
	if err := e.waitUntil(ctx, 5*time.Second, func() (bool, error) {
		// Sentinel's promotion closed the clients' connections
		// (CLIENT KILL): a pooled one may answer a reset once.
		info, err := promoted.Redis.Info(ctx, "replication").Result()
		had, _ = strconv.ParseInt(infoField(info, "master_repl_offset"), 10, 64)
		return err == nil, nil
	}); err != nil {
		return fail(err)
	}
	if err := e.waitUntil(ctx, 30*time.Second, func() (bool, error) {
		s, err := e.Redis.Info(ctx, "replication").Result()
		if err != nil {
			return false, nil // as above
		}
		got, _ := strconv.ParseInt(infoField(s, "slave_repl_offset"), 10, 64)
		return infoField(s, "master_link_status") == "up" && got >= had, nil
	}); err != nil {
		return fail(fmt.Errorf("%s never caught up with %s: %w", e.StockNode, promoted.Name, err))
	}
	e.mark(reason.New("backAsReplica", "{node} back, a replica of {primary}", "node", e.StockNode, "primary", promoted.Name))
	if err := e.primaryIs(ctx, sentinels, promoted.Addr); err != nil { // the failover to it over, everywhere
		return fail(err)
	}
	if err := e.Procs.Freeze(other.Name, true); err != nil {
		return fail(err)
	}
	thaw := e.thaw(other.Name)
	var view string // the sentinel's last view, for the error
	err = waitEvery(ctx, promotionLimit, sentinelPoll, func() (bool, error) {
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
		view = fmt.Sprintf("primary's flags %q, replicas %v", master["flags"], replicas)
		return down && ready, nil
	})
	if err != nil {
		err = fmt.Errorf("waiting for %s counted down and %s ready as a replica (%s): %w", other.Name, e.StockNode, view, err)
	}
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
	e.mark(reason.New("failedBack", "Sentinel failed back to {node}", "node", e.StockNode))
	for _, sb := range e.Standbys { // the one promoted is still a primary until Sentinel demotes it
		if err := e.linkThroughProxy(ctx, sb); err != nil {
			return fail(err)
		}
	}
	return nil
}

// resetSentinels forgets each sentinel's view of the stock's node (SENTINEL
// RESET: replicas, other sentinels, any aborted failover's delay) and waits
// until each has found the standbys and the other sentinels again.
func (e Env) resetSentinels(ctx context.Context, sentinels []*redis.SentinelClient) error {
	for _, s := range sentinels {
		if err := s.Reset(ctx, e.SentinelMaster).Err(); err != nil {
			return err
		}
	}
	err := waitEvery(ctx, promotionLimit, sentinelPoll, func() (bool, error) {
		return !slices.ContainsFunc(sentinels, func(s *redis.SentinelClient) bool {
			return !probe.SentinelKnows(ctx, s, e.SentinelMaster, len(e.Standbys), len(sentinels)-1)
		}), nil
	})
	if err != nil {
		return fmt.Errorf("after SENTINEL RESET, the sentinels did not find the standbys and each other again: %w", err)
	}
	return nil
}
