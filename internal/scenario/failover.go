package scenario

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/probe"
	"github.com/locklab/locklab/internal/reason"
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
// 500 ms, gives the lock up and sells nothing (503): one holder only. That
// is the +ack cell's precondition, checked: a 503 after a WAIT reached the
// node, the stock untouched; otherwise the cell is "not tested". An A that
// gets past the acknowledgement (not waited for: off=lock-ack) and reads
// the stock holding the lock is the fix failing: the failover comes while it
// holds, as in the cell without +ack, and the history shows two holders. An
// A that sold before the failover had its sale lost by it: a confirmed sale
// lost. After
// the cell the old primary comes back, empty, as the primary again, and the
// standby follows it.
func failover(ack bool) runFunc {
	return func(ctx context.Context, e Env, lock string, before int64) (observed, detail string, err error) {
		sb, err := e.standby(ctx, "failover")
		if err != nil {
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
			// comes before the failover. Its precondition: it was the
			// acknowledgement that stopped it. An A that got past the
			// acknowledgement (it read the stock, holding the lock) is the
			// fix failing: the failover then comes while it holds, as in
			// failover, and the history shows what that costs.
			var waits int64
			if a, ra, waits, err = e.heldOrGaveUp(ctx, lock, hooks+"&replica_ack=1"); err != nil {
				return "", "", err
			}
			if a == nil && ra.outcome != api.Sold {
				why, err := e.ackStopped(ctx, ra, waits, before)
				if err != nil || why.Text != "" {
					return notTested(why), "reply " + ra.String(), err
				}
				e.mark(reason.New("gaveUpStandby", "{node} gave the lock up: the standby did not acknowledge it", "node", e.Replicas[0].Name))
			}
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
		detail = fmt.Sprintf("replies %s, %s; stock %d -> %d on the promoted standby", ra, rb, before, after)
		if ack && confirmedLost(before, after, ra, rb) { // A sold: the acknowledgement did not stop it
			return ConfirmedLost, detail, nil
		}
		return byHistory, detail, nil
	}
}

// heldOrGaveUp starts a sale on replica 1 with hooks, one that asks for
// its lock's acknowledgement, and waits for whichever comes first: its
// reply (it gave the lock up, or sold without holding it through anything),
// returned with a nil channel; or its read of the stock (it holds the lock
// past any acknowledgement), returned as the channel its reply will come
// on. waits is how many WAITs the stock's node had served before the sale.
func (e Env) heldOrGaveUp(ctx context.Context, lock, hooks string) (a <-chan reply, ra reply, waits int64, err error) {
	if waits, err = calls(ctx, e.Redis, "wait"); err != nil {
		return nil, reply{}, 0, err
	}
	reads, err := e.getCalls(ctx)
	if err != nil {
		return nil, reply{}, 0, err
	}
	s := e.sellAt(ctx, e.Replicas[0].URL, lock, hooks)
	replied := false
	err = e.waitUntil(ctx, 5*time.Second, func() (bool, error) {
		select {
		case ra = <-s:
			replied = true
			return true, nil
		default:
		}
		n, err := e.getCalls(ctx)
		return n > reads, err
	})
	switch {
	case replied:
		return nil, ra, waits, ra.err
	case err != nil:
		<-s
		return nil, reply{}, 0, fmt.Errorf("the first sale neither answered nor read the stock: %w", err)
	}
	e.mark(reason.New("pastAck", "{node} holds the lock past its acknowledgement and read the stock", "node", e.Replicas[0].Name))
	return s, reply{}, waits, nil
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
// writeVerdict checks the cell's precondition first.
func failoverWrite(ack bool) runFunc {
	return func(ctx context.Context, e Env, lock string, before int64) (observed, detail string, err error) {
		sb, err := e.standby(ctx, "failover-write")
		if err != nil {
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
			e.mark(reason.New("stoppedBeforeWrite", "{node} stopped before its write", "node", e.Replicas[0].Name))
			if heal, err = e.cut(sb.Name, e.StockNode); err != nil {
				return "", "", err
			}
			defer func() { err = also(err, heal()) }()
			e.mark(reason.New("resumed", "{node} resumed", "node", e.Replicas[0].Name))
			if err := thaw(); err != nil {
				return "", "", err
			}
		}
		ra := <-a
		if ra.err != nil {
			return "", "", ra.err
		}
		primary, err1 := e.Redis.Get(ctx, e.StockKey).Int64()
		standby, err2 := sb.Redis.Get(ctx, e.StockKey).Int64() // its link stalled: it serves what it had
		if err := errors.Join(err1, err2); err != nil {
			return "", "", err
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
		detail = fmt.Sprintf("reply %s; stock %d -> %d on the primary, %d on the standby before the failover, %d on the promoted standby", ra, before, primary, standby, after)
		return writeVerdict(ack, ra, before, primary, standby, after), detail, nil
	}
}

// writeVerdict judges failover-write from A's reply ra and the stock: before
// the sale, on the primary and on the standby once A had answered, and on the
// promoted standby. Its precondition: A's write reached the primary and not
// the standby, and A answered 200 (a confirmed sale, which the failover can
// lose) or, asked for an acknowledgement, 503 indeterminate (the fix holding
// its reply back). A 200 under the acknowledgement is judged like any other:
// lost, it fails the cell.
func writeVerdict(ack bool, ra reply, before, primary, standby, promoted int64) string {
	switch {
	case before-primary != 1:
		return notTested(reason.New("neverReachedPrimary", "the first sale's write never reached the primary (reply {reply}, its stock {a} -> {b})", "reply", ra, "a", before, "b", primary))
	case standby != before:
		return notTested(reason.New("standbyHadWrite", "the standby had the first sale's write before the failover (its stock {a} -> {b}): its link never stalled", "a", before, "b", standby))
	case ra.outcome != api.Sold && (!ack || ra.code != api.CodeIndeterminate):
		return notTested(reason.New("neitherConfirmed", "the first sale answered {reply}: neither a confirmed sale nor one the acknowledgement held back as indeterminate", "reply", ra))
	case confirmedLost(before, promoted, ra):
		return ConfirmedLost
	}
	return NoConfirmedLost
}

// confirmedLost reports whether the replies confirmed more sales (200) than
// the stock went down by, from before to after: a confirmed sale lost.
func confirmedLost(before, after int64, rs ...reply) bool {
	sold := int64(0)
	for _, r := range rs {
		if r.outcome == api.Sold {
			sold++
		}
	}
	return sold > before-after
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
	e.mark(reason.New("primaryKilled", "{node} (primary) killed", "node", e.StockNode))
	failBack = func() error { return e.failBack(ctx, sb, restartPrimary) }
	if err := errors.Join(sb.Redis.SlaveOf(ctx, "no", "one").Err(), e.repoint(sb.Addr), heal()); err != nil {
		return failBack, fmt.Errorf("failover: %w", err)
	}
	e.mark(reason.New("promoted", "{node} promoted; the stock's and the lock's node is now {node}", "node", sb.Name))
	return failBack, nil
}

// standby is the stock node's first standby, which scenario promotes by
// hand, once it has replicated everything the primary has; it needs the
// fault proxies too, to stall its link.
func (e Env) standby(ctx context.Context, scenario string) (Standby, error) {
	if len(e.Standbys) == 0 || e.Faults == nil {
		return Standby{}, errors.New(scenario + " needs the standby and the fault proxies: a cluster started with FAULTS=1")
	}
	sb := e.Standbys[0]
	return sb, e.standbyInSync(ctx, sb)
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
		name := probe.FaultProxyName(r.Name, e.StockNode)
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
	e.mark(reason.New("backAsPrimary", "{node} back as the primary, {standby} its standby", "node", e.StockNode, "standby", sb.Name))
	if err != nil {
		return notUndone(e.StockNode, LeftFailedOver, fmt.Errorf("fail back: %w", err))
	}
	return e.standbyInSync(ctx, sb)
}
