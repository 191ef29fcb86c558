package redisconn

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotAnswering is a command to a Redlock node refused at once: a command
// to it timed out, and it has not answered a PING since.
var ErrNotAnswering = errors.New("redis: node not answering (a command to it timed out; refused until it answers a PING)")

// breakerRetry is how often a node held off is asked for a PING.
const breakerRetry = 250 * time.Millisecond

// breaker is a Redlock node client's circuit breaker (go-redis's Limiter).
//
// Redlock asks every node and waits for each one's answer: a node that takes
// commands and answers none (its process frozen, or a stopped container,
// whose old address drops every packet) costs each attempt its client's read
// timeout, with the lock granted on the other nodes meanwhile, so every
// waiter waits too: each pooled connection to the node cost one timeout. The
// Redlock algorithm asks for per-node timeouts small against the lease for
// this reason; the breaker pays the timeout about once: after a command to
// the node timed out, the node's
// commands fail at once (ErrNotAnswering, a node failed: a majority of the
// others still grants the lock), until a PING on a connection of its own
// answers. Refused connections (a node that is down and says so) fail fast
// by themselves and do not trip it.
//
// Measured on Compose (2026-11-29, offline images, the load test at -n 1000
// -c 25 -lock redlock right after `docker compose stop redis2`, three rounds
// each, one after the other): without the breaker p99 7.3-8.2 s, 8.8-9.8 s
// in all (earlier that hour, 15-16 requests failed at the 10 s deadline in
// two rounds of three); with it p99 1.3-1.4 s, 2.6-3.1 s in all, none
// failed; with every node up, p99 0.4-0.5 s.
type breaker struct {
	open  atomic.Bool
	probe *redis.Client // the node, without the breaker: its PINGs
	every time.Duration
	done  chan struct{} // closed with the client: the PINGs stop
}

// Allow refuses a command while the node is held off.
func (b *breaker) Allow() error {
	if b.open.Load() {
		return ErrNotAnswering
	}
	return nil
}

// ReportResult holds the node off after a command to it timed out.
func (b *breaker) ReportResult(err error) {
	if timedOut(err) && b.open.CompareAndSwap(false, true) {
		go b.retry()
	}
}

// retry PINGs the node every b.every until it answers, then lets its
// commands through again.
func (b *breaker) retry() {
	t := time.NewTicker(b.every)
	defer t.Stop()
	for {
		select {
		case <-b.done:
			return
		case <-t.C:
		}
		if b.probe.Ping(context.Background()).Err() == nil {
			b.open.Store(false)
			return
		}
	}
}

// timedOut reports a network timeout: a read, a write or a dial that got no
// answer in time.
func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// NewNode returns a client for the Redlock node at addr: New's, with the
// breaker.
func NewNode(addr, password string) redis.UniversalClient {
	o := Options(addr, password)
	probe := *o
	probe.PoolSize = 1
	b := &breaker{probe: redis.NewClient(&probe), every: breakerRetry, done: make(chan struct{})}
	o.Limiter = b
	return &node{Client: withAhead(redis.NewClient(o)), b: b}
}

// node is a Redlock node's client, which closes its breaker with it.
type node struct {
	*redis.Client
	b    *breaker
	once sync.Once
}

// Close closes the client, stops its breaker's PINGs and closes their
// client.
func (n *node) Close() error {
	err := n.Client.Close()
	n.once.Do(func() {
		close(n.b.done)
		err = errors.Join(err, n.b.probe.Close())
	})
	return err
}
