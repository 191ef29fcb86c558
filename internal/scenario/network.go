package scenario

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/probe"
	"github.com/locklab/locklab/internal/reason"
)

// The network scenarios act on the proxy between one replica and one Redis
// node (the local cluster's fault proxies, FAULTS=1): the other replica's
// way to the same node is untouched.

// partitionHolder: S, on replica 1, takes the lock and reads the stock, with
// a long business time (3 x TTL); then replica 1 is cut off from the lock's
// node (every byte between them dropped, both ways). Its lease runs out
// (v8's watchdog cannot renew it); B, on replica 2, takes the lock and
// sells; the cut heals; S writes what it read. v6 and v7 never learn that
// their lease is gone: oversell. v8's watchdog has seen its renewals fail
// for longer than the lease and raised the lease's lost signal: S stops
// before its write (503 lease_lost). With fencing, the stock refuses S's
// stale write.
func partitionHolder(fenced bool) runFunc {
	return func(ctx context.Context, e Env, lock string, before int64) (observed, detail string, err error) {
		fence := fenceHook(fenced)
		s, err := e.heldAndRead(ctx, lock, "hold="+(3*e.TTL).String()+"&"+fence)
		if err != nil {
			return "", "", err
		}
		heal, err := e.cut(e.Replicas[0].Name, e.StockNode)
		if err != nil {
			<-s
			return "", "", err
		}
		defer func() { err = also(err, heal()) }()
		if err := e.waitLock(ctx, false, 3*e.TTL); err != nil {
			<-s
			return "", "", fmt.Errorf("the cut-off holder's lease never expired: %w", err)
		}
		rb := <-e.sellAt(ctx, e.Replicas[1].URL, lock, fence)
		if err := heal(); err != nil {
			<-s
			return "", "", err
		}
		return e.staleHolder(ctx, before, <-s, rb)
	}
}

// staleHolder is the outcome of a holder S whose lock B took while S still
// believed it held it, once both have answered: oversell, S's write refused
// by fencing, or S stopping before its write (its lease's lost signal).
func (e Env) staleHolder(ctx context.Context, before int64, rs, rb reply) (observed, detail string, err error) {
	if observed, detail, err = e.verdict(ctx, before, rs, rb); err != nil || observed != NoOversell {
		return observed, detail, err
	}
	switch {
	case rs.code == api.CodeFenced:
		return StaleRefused, detail, nil
	case rs.code == api.CodeLeaseLost && rb.outcome == api.Sold:
		return StopsBeforeWrite, detail + ", the first sale answered " + rs.code, nil
	}
	return observed, detail, nil
}

// delayedWrite: S, on replica 1, takes the lock, reads the stock and works
// 0.5 x TTL; meanwhile everything replica 1 sends to the lock's node is
// delayed by 0.8 x TTL on the way (Kleppmann's delayed packet). S's write
// leaves while its lease holds and lands after it has expired (at about 1.3 x
// TTL), once B, on replica 2, waiting since S took the lock, has taken it and
// sold: both sell the same unit. Its reply comes back 0.8 x TTL after it left,
// inside the client's timeout, so S reports a sale. With fencing the stale
// write is refused where it lands.
func delayedWrite(fenced bool) runFunc {
	return func(ctx context.Context, e Env, lock string, before int64) (observed, detail string, err error) {
		fence := fenceHook(fenced)
		s, err := e.heldAndRead(ctx, lock, "hold="+(e.TTL/2).String()+"&"+fence)
		if err != nil {
			return "", "", err
		}
		undelay, err := e.delay(e.Replicas[0].Name, e.StockNode, e.TTL*8/10)
		if err != nil {
			<-s
			return "", "", err
		}
		defer func() { err = errors.Join(err, undelay()) }()
		b := e.sellAt(ctx, e.Replicas[1].URL, lock, fence)
		rs, rb := <-s, <-b
		if err := undelay(); err != nil {
			return "", "", err
		}
		if observed, detail, err = e.verdict(ctx, before, rs, rb); err != nil || observed != NoOversell || rs.code != api.CodeFenced {
			return observed, detail, err
		}
		return StaleRefused, detail, nil
	}
}

// heldAndRead starts a sale on replica 1 with hooks and returns its reply
// once it holds the lock and has read the stock.
func (e Env) heldAndRead(ctx context.Context, lock, hooks string) (<-chan reply, error) {
	reads, err := e.getCalls(ctx)
	if err != nil {
		return nil, err
	}
	s := e.sellAt(ctx, e.Replicas[0].URL, lock, hooks)
	if err := e.waitRead(ctx, reads); err != nil {
		<-s
		return nil, err
	}
	return s, nil
}

// cut drops every byte between replica and node, both ways, until heal,
// which closes the connections that were cut (as a partition that lasted
// would end them). heal runs once however often it is called.
func (e Env) cut(replica, node string) (heal func() error, err error) {
	p, err := e.faultProxy(replica, node)
	if err != nil {
		return nil, err
	}
	for _, stream := range []string{"upstream", "downstream"} {
		if _, err := p.AddToxic("cut-"+stream, "timeout", stream, 1, toxiproxy.Attributes{"timeout": 0}); err != nil {
			return nil, errors.Join(fmt.Errorf("scenario: cut %s: %w", p.Name, err), e.removeToxics(p, "cut-upstream"))
		}
	}
	e.mark(reason.New("cutOff", "{replica} cut off from {node}", "replica", replica, "node", node))
	return sync.OnceValue(func() error {
		err := e.removeToxics(p, "cut-upstream", "cut-downstream")
		e.mark(reason.New("reachesAgain", "{replica} reaches {node} again", "replica", replica, "node", node))
		return notUndone(p.Name, LeftCutOff, err)
	}), nil
}

// delay holds everything replica sends to node for d on the way, until
// undelay.
func (e Env) delay(replica, node string, d time.Duration) (undelay func() error, err error) {
	p, err := e.faultProxy(replica, node)
	if err != nil {
		return nil, err
	}
	if _, err := p.AddToxic("delay", "latency", "upstream", 1, toxiproxy.Attributes{"latency": d.Milliseconds()}); err != nil {
		return nil, fmt.Errorf("scenario: delay %s: %w", p.Name, err)
	}
	e.mark(reason.New("delayed", "{replica}'s packets to {node} delayed {ms} ms", "replica", replica, "node", node, "ms", d.Milliseconds()))
	return sync.OnceValue(func() error { return notUndone(p.Name, LeftDelayed, e.removeToxics(p, "delay")) }), nil
}

func (e Env) faultProxy(replica, node string) (*toxiproxy.Proxy, error) {
	if e.Faults == nil {
		return nil, errors.New("scenario: no fault proxies: start the cluster with FAULTS=1 (make scenarios does)")
	}
	name := probe.FaultProxyName(replica, node)
	p, err := e.Faults.Proxy(name)
	if err != nil {
		return nil, fmt.Errorf("scenario: fault proxy %s: %w", name, err)
	}
	return p, nil
}

func (e Env) removeToxics(p *toxiproxy.Proxy, names ...string) error {
	var errs []error
	for _, n := range names {
		if err := p.RemoveToxic(n); err != nil {
			errs = append(errs, fmt.Errorf("scenario: %s: remove %s: %w", p.Name, n, err))
		}
	}
	return errors.Join(errs...)
}
