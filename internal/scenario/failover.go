package scenario

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/cluster"
)

// failover (seed 004's problem 4): the lock's node has an asynchronous
// replica, the standby. Its replication link stalls (the fault proxy it
// replicates through drops every byte); holder A, on replica 1, takes the lock
// and reads the stock; the primary dies before the standby has A's key;
// the standby is promoted (REPLICAOF NO ONE, what Sentinel would do) and
// both replicas' way to "the lock's node" now leads to it (the fault
// proxies re-pointed, as a virtual address would move). Sale B, on replica
// 2, finds no lock there and takes it while A still holds its lease: two
// holders. With replica_ack=1 (Redisson's answer, -replica-ack) A waits
// after acquiring for the standby's acknowledgement, does not get it within
// 500 ms, gives the lock up and sells nothing (503): one holder only. After
// the cell the old primary comes back, empty, as the primary again, and the
// standby follows it.
func failover(ack bool) runFunc {
	return func(ctx context.Context, e Env, lock string, before int64) (observed, detail string, err error) {
		sb, err := e.standby("failover")
		if err != nil {
			return "", "", err
		}
		if err := e.standbyInSync(ctx, sb); err != nil {
			return "", "", err
		}
		heal, err := e.cut(sb.Name, e.StockNode) // the replication link stalls
		if err != nil {
			return "", "", err
		}
		defer func() { err = also(err, heal()) }()
		hooks := "hold=" + (e.TTL * 9 / 10).String()
		var a <-chan reply
		var ra reply
		if ack {
			// A's acquisition waits for the standby and gives up: its reply
			// comes before the failover.
			ra = <-e.sellAt(ctx, e.Replicas[0].URL, lock, hooks+"&replica_ack=1")
		} else if a, err = e.heldAndRead(ctx, lock, hooks); err != nil {
			return "", "", err
		}
		failBack, err := e.promote(ctx, sb, heal)
		if failBack != nil {
			defer func() { err = errors.Join(err, failBack()) }()
		}
		if err != nil {
			if a != nil {
				<-a
			}
			return "", "", err
		}
		rb := <-e.sellAt(ctx, e.Replicas[1].URL, lock, "")
		if a != nil {
			ra = <-a
		}
		if err := errors.Join(ra.err, rb.err); err != nil {
			return "", "", err
		}
		after, err := sb.Redis.Get(ctx, e.StockKey).Int64()
		if err != nil {
			return "", "", err
		}
		detail = fmt.Sprintf("replies %d %s, %d; stock %d -> %d on the promoted standby", ra.status, ra.code, rb.status, before, after)
		return byHistory, detail, nil
	}
}

// failoverWrite (seed 004's problem 4, for the stock instead of the lock):
// the stock's node has its standby in sync. Sale A, on replica 1, takes the
// lock, reads the stock and stops itself right before its write; the
// standby's replication link stalls; A resumes and writes (atomic, which has
// no lock and no such moment, sells once the link has stalled). Once A has
// answered the primary is killed and the standby promoted. Without an
// acknowledgement A answered 200 for a write the standby never got: a
// confirmed sale lost. With replica_ack=1 (-replica-ack 1) the write waits for
// the standby's acknowledgement, does not get it within 500 ms, and A
// answers 503 indeterminate: no 200 is missing from the promoted stock.
func failoverWrite(ack bool) runFunc {
	return func(ctx context.Context, e Env, lock string, before int64) (observed, detail string, err error) {
		sb, err := e.standby("failover-write")
		if err != nil {
			return "", "", err
		}
		if err := e.standbyInSync(ctx, sb); err != nil {
			return "", "", err
		}
		hooks := ""
		if ack {
			hooks = "replica_ack=1"
		}
		var a <-chan reply
		var heal func() error
		if lock == "atomic" {
			if heal, err = e.cut(sb.Name, e.StockNode); err != nil {
				return "", "", err
			}
			defer func() { err = also(err, heal()) }()
			a = e.sellAt(ctx, e.Replicas[0].URL, lock, hooks)
		} else {
			a = e.sellAt(ctx, e.Replicas[0].URL, lock, hooks+"&stop_before_write=1")
			thaw := e.thaw(e.Replicas[0].Name)
			defer func() { err = also(err, thaw()) }()
			if err := e.waitUntil(ctx, 10*time.Second, func() (bool, error) { return e.Procs.Stopped(e.Replicas[0].Name) }); err != nil {
				return "", "", fmt.Errorf("the sale never stopped before its write: %w", err)
			}
			e.mark(e.Replicas[0].Name + " stopped before its write")
			if heal, err = e.cut(sb.Name, e.StockNode); err != nil {
				return "", "", err
			}
			defer func() { err = also(err, heal()) }()
			e.mark(e.Replicas[0].Name + " resumed")
			if err := thaw(); err != nil {
				return "", "", err
			}
		}
		ra := <-a
		if ra.err != nil {
			return "", "", ra.err
		}
		failBack, err := e.promote(ctx, sb, heal)
		if failBack != nil {
			defer func() { err = errors.Join(err, failBack()) }()
		}
		if err != nil {
			return "", "", err
		}
		after, err := sb.Redis.Get(ctx, e.StockKey).Int64()
		if err != nil {
			return "", "", err
		}
		sold := map[bool]int64{true: 1}[ra.outcome == api.Sold]
		detail = fmt.Sprintf("reply %s; stock %d -> %d on the promoted standby", strings.TrimSpace(fmt.Sprint(ra.status, " ", ra.code)), before, after)
		if sold > before-after {
			return ConfirmedLost, detail, nil
		}
		return NoConfirmedLost, detail, nil
	}
}

// promote fails the stock's node over: the primary killed, the standby
// promoted (REPLICAOF NO ONE, what Sentinel would do), both replicas' way to
// the node led to it (the fault proxies re-pointed, as a virtual address
// would move) and the replication link healed. failBack, non-nil once the
// primary was killed, undoes it all, whatever else failed.
func (e Env) promote(ctx context.Context, sb Standby, heal func() error) (failBack func() error, err error) {
	restartPrimary, err := e.Procs.Kill(e.StockNode)
	if err != nil {
		return nil, err
	}
	e.mark(e.StockNode + " (primary) killed")
	failBack = func() error { return e.failBack(ctx, sb, restartPrimary) }
	if err := errors.Join(sb.Redis.SlaveOf(ctx, "no", "one").Err(), e.repoint(sb.Addr), heal()); err != nil {
		return failBack, fmt.Errorf("failover: %w", err)
	}
	e.mark(sb.Name + " promoted; the stock's and the lock's node is now " + sb.Name)
	return failBack, nil
}

// standby is the stock node's first standby, which scenario promotes by
// hand; it needs the fault proxies too, to stall its link.
func (e Env) standby(scenario string) (Standby, error) {
	if len(e.Standbys) == 0 || e.Faults == nil {
		return Standby{}, errors.New(scenario + " needs the standby and the fault proxies: a cluster started with FAULTS=1")
	}
	return e.Standbys[0], nil
}

// standbyInSync waits until the standby has replicated everything the
// primary has (the stock the cell just set).
func (e Env) standbyInSync(ctx context.Context, sb Standby) error {
	err := e.waitUntil(ctx, 10*time.Second, func() (bool, error) {
		p, err1 := e.Redis.Info(ctx, "replication").Result()
		s, err2 := sb.Redis.Info(ctx, "replication").Result()
		if err := errors.Join(err1, err2); err != nil {
			return false, err
		}
		return infoField(s, "master_link_status") == "up" && infoField(s, "slave_repl_offset") == infoField(p, "master_repl_offset"), nil
	})
	if err != nil {
		return fmt.Errorf("the standby %s never caught up with the primary: %w", sb.Name, err)
	}
	return nil
}

// repoint leads both replicas' way to the stock's node to addr.
func (e Env) repoint(addr string) error {
	var errs []error
	for _, r := range e.Replicas {
		name := cluster.FaultProxyName(r.Name, e.StockNode)
		p, err := e.Faults.Proxy(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("scenario: fault proxy %s: %w", name, err))
			continue
		}
		p.Upstream = addr
		errs = append(errs, p.Save())
	}
	return errors.Join(errs...)
}

// failBack restores the cluster after a failover: the old primary back
// (empty) and the replicas' way to it, the standby its replica again.
func (e Env) failBack(ctx context.Context, sb Standby, restartPrimary func(context.Context) error) error {
	_, port, _ := net.SplitHostPort(sb.Link)
	err := errors.Join(restartPrimary(ctx), e.repoint(e.StockAddr), sb.Redis.SlaveOf(ctx, "127.0.0.1", port).Err())
	e.mark(e.StockNode + " back as the primary, " + sb.Name + " its standby")
	if err != nil {
		return notUndone(e.StockNode, LeftFailedOver, fmt.Errorf("fail back: %w", err))
	}
	return e.standbyInSync(ctx, sb)
}
