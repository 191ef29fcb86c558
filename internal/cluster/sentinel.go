package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/probe"
	"github.com/locklab/locklab/internal/redisconn"
	"github.com/redis/go-redis/v9"
)

// Redis Sentinel (Config.Sentinel): the stock's node with two standbys and
// three sentinels watching it, as production runs a single Redis; the
// replicas reach the stock and the single-node locks through the primary the
// sentinels name (-sentinel), and follow a failover. Sentinel, not a
// scenario, then decides when the primary is down and which standby takes
// over.

// SentinelMaster is the name the sentinels watch the stock's node by: the
// service's -sentinel-master default.
const SentinelMaster = "locklab"

// sentinelPortBase: the sentinels listen on 26380, 26381 and 26382.
const sentinelPortBase = 26380

// SentinelDownAfter is how long a primary must fail to answer before a
// sentinel takes it as down (down-after-milliseconds): short, so that a
// failover is a matter of seconds on this machine (production runs take
// 5-30 s, to ride out a pause). Not 1 s: a promotion kills the promoted
// node's client connections (CLIENT KILL TYPE normal), the other
// sentinels' too, and a PING lost with them counted as unanswered until a
// new one was; with 1 s, the sentinels sometimes took the node they had just
// promoted for down and failed it over again (seen: about one cell in ten).
const SentinelDownAfter = 3 * time.Second

// sentinelFailoverTimeout is each sentinel's failover-timeout. Sentinel
// re-points a replica that replicates from another address than the
// primary's once this long has passed since it last saw its configuration
// change (+fix-slave-config): with the fault proxies, that is every standby,
// whose replication goes through its proxy. A long one keeps the proxies in
// the path for the whole of a run. A failover that finds no leader is tried
// again only after twice this long: with three sentinels, one that asks for
// votes first wins them (each votes once an epoch), so it does not come to
// that on one machine.
const sentinelFailoverTimeout = 30 * time.Minute

// planSentinel lays out the sentinels of the stock's node; the standbys are
// planStandbys'.
func planSentinel(dir string, s *State) {
	bin := lookPath("redis-server")
	for i := range 3 {
		port := sentinelPortBase + i
		name := "sentinel-" + strconv.Itoa(port)
		s.Sentinels = append(s.Sentinels, Proc{Name: name, Addr: "127.0.0.1:" + strconv.Itoa(port), Log: filepath.Join(dir, name+".log"),
			Args: []string{bin, sentinelConf(dir, name), "--sentinel"}})
	}
}

// SentinelAddrs are the sentinels' addresses.
func (s *State) SentinelAddrs() []string {
	var addrs []string
	for _, p := range s.Sentinels {
		addrs = append(addrs, p.Addr)
	}
	return addrs
}

// sentinelConf is a sentinel's configuration file. Each has its own, private
// (with a password it holds it), which the sentinel rewrites as it learns
// the replicas, the other sentinels and the failovers.
func sentinelConf(dir, name string) string { return filepath.Join(dir, name+".conf") }

// writeSentinelConfs writes each sentinel's file afresh: a file left by an
// earlier run would carry its epochs and its idea of the primary.
func writeSentinelConfs(dir string, s *State) error {
	stock := s.StockNode()
	var errs []error
	for _, p := range s.Sentinels {
		var b strings.Builder
		fmt.Fprintf(&b, "port %d\nbind 127.0.0.1\ndaemonize no\ndir %s\n", portOf(p.Addr), redisQuote(dir))
		fmt.Fprintf(&b, "sentinel monitor %s 127.0.0.1 %d 2\n", SentinelMaster, portOf(stock.Addr))
		fmt.Fprintf(&b, "sentinel down-after-milliseconds %s %d\n", SentinelMaster, SentinelDownAfter.Milliseconds())
		fmt.Fprintf(&b, "sentinel failover-timeout %s %d\n", SentinelMaster, sentinelFailoverTimeout.Milliseconds())
		fmt.Fprintf(&b, "sentinel parallel-syncs %s 1\n", SentinelMaster)
		if pw := s.RedisPassword; pw != "" { // the nodes', the sentinels' own, and the one they ask each other with
			q := redisQuote(pw)
			fmt.Fprintf(&b, "requirepass %s\nsentinel auth-pass %s %s\nsentinel sentinel-pass %s\n", q, SentinelMaster, q, q)
		}
		errs = append(errs, writePrivate(sentinelConf(dir, p.Name), []byte(b.String())))
	}
	return errors.Join(errs...)
}

// removeSentinelConfs removes the sentinels' files (they may hold the
// password).
func removeSentinelConfs(dir string, sentinels []Proc) error {
	var errs []error
	for _, p := range sentinels {
		errs = append(errs, removeFile(sentinelConf(dir, p.Name)))
	}
	return errors.Join(errs...)
}

// sentinelsReady waits until every sentinel knows the standbys and the two
// other sentinels: before that, a failover could find no quorum or no
// standby to promote.
func sentinelsReady(ctx context.Context, s *State, limit time.Duration) error {
	var errs []error
	for _, p := range s.Sentinels {
		c := redis.NewSentinelClient(redisconn.Options(p.Addr, s.RedisPassword))
		err := waitUntil(ctx, limit, p.Name+" (knowing the standbys and the other sentinels)", func() bool {
			return p.alive() && probe.SentinelKnows(ctx, c, SentinelMaster, len(s.Standbys), len(s.Sentinels)-1)
		})
		errs = append(errs, err, c.Close())
	}
	return errors.Join(errs...)
}
