package scenario

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/probe"
	"github.com/locklab/locklab/internal/reason"
	"github.com/locklab/locklab/internal/versions"
)

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
			e.mark(reason.New("newLeader", "{lock} elected a new leader", "lock", lock))
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
	e.mark(reason.New("frozen", "{node} frozen", "node", node))
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
		e.mark(reason.New("killed", "{node} killed", "node", name))
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
		member, leader, err := e.Stores.EtcdStatus(sctx, m.Addr)
		cancel()
		if err == nil {
			ids[member], leaders[leader] = true, true
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
		if mode, err := probe.ZKMode(m.Addr, time.Second); m.Name != gone && err == nil && mode == "leader" {
			return true
		}
	}
	return false
}

// zkLeader is the process name of ZooKeeper's current leader.
func (e Env) zkLeader() (string, error) {
	for _, m := range e.ZKMembers {
		mode, err := probe.ZKMode(m.Addr, time.Second)
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
		member, leader, err := e.Stores.EtcdStatus(ctx, m.Addr)
		if err != nil {
			return "", fmt.Errorf("scenario: etcd %s: %w", m.Name, err)
		}
		if member == leader {
			return m.Name, nil
		}
	}
	return "", errors.New("scenario: etcd has no leader")
}
