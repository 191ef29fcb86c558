// Package redisconn is how every part of the project connects to Redis: one
// set of client options (so the bench measures the client the service runs)
// and one parser of node lists (-redlock, the bench's and the load test's
// flags).
package redisconn

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options are the client options for the node at addr. Short network
// timeouts: a dead node must turn into a 503 quickly, not hold a request for
// go-redis's default 3 s per attempt; and no retries, so one command is one
// attempt and its outcome is the reply's.
//
// Two choices measured under the bench's load (issue 14):
//   - RESP2: with RESP3, go-redis's default, every command first checks its
//     connection for push notifications (a read syscall and a parse): 17 %
//     of a replica's CPU in a profile of v6 handed off, none of it of use
//     here (no client-side caching; pub/sub has its own connection). RESP2
//     cut the replicas' CPU per sale by about a third.
//   - 4 KiB buffers: every reply here is a few bytes, and go-redis's 32 KiB
//     read and write buffers per connection, over pools that grow to the
//     load's concurrency on four clients (the stock's node and redlock's
//     three), held most of a replica's peak memory.
//
// And no CLIENT SETINFO on connect (DisableIdentity): it only names the
// client library in CLIENT LIST, and Redis 7.0 (Debian bookworm's: the local
// cluster's and the offline images') does not know it, and answered each new
// connection with two ERR replies that go-redis dropped (INFO errorstats: 88
// during one 2,000-sale load test).
func Options(addr, password string) *redis.Options {
	return &redis.Options{Addr: addr, Password: password,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		MaxRetries: -1, DialerRetries: 1, PoolSize: 128, Protocol: 2, DisableIdentity: true,
		ReadBufferSize: bufferSize, WriteBufferSize: bufferSize,
		PipelineReadBufferSize: bufferSize, PipelineWriteBufferSize: bufferSize}
}

// bufferSize is each connection's read and write buffer.
const bufferSize = 4 << 10

// New returns a client for the node at addr.
func New(addr, password string) *redis.Client {
	return withAhead(redis.NewClient(Options(addr, password)))
}

// withAhead gives c its first hook, the one that sends Ahead commands.
func withAhead(c *redis.Client) *redis.Client {
	c.AddHook(aheadHook{client: c})
	return c
}

// NewFailover returns a client of the primary that Redis Sentinel names
// master, asked of sentinels (host:port), with Options' settings: after a
// failover (Sentinel promotes a replica) its connections go to the new
// primary, as a service's would in production. The sentinels take the
// nodes' password too (requirepass on each sentinel, as the local cluster
// and the Compose profile set it).
func NewFailover(master string, sentinels []string, password string) *redis.Client {
	o := Options("", password)
	return withAhead(redis.NewFailoverClient(&redis.FailoverOptions{MasterName: master, SentinelAddrs: sentinels,
		Password: o.Password, SentinelPassword: o.Password,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		MaxRetries: o.MaxRetries, DialerRetries: o.DialerRetries, PoolSize: o.PoolSize, Protocol: o.Protocol,
		DisableIdentity: o.DisableIdentity, ReadBufferSize: o.ReadBufferSize, WriteBufferSize: o.WriteBufferSize,
		PipelineReadBufferSize: o.PipelineReadBufferSize, PipelineWriteBufferSize: o.PipelineWriteBufferSize}))
}

// NewAll returns a client for each of addrs, as redlock takes them: each
// with its breaker (NewNode).
func NewAll(addrs []string, password string) []redis.UniversalClient {
	clients := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		clients[i] = NewNode(a, password)
	}
	return clients
}

// CloseAll closes every client, keeping every error.
func CloseAll(clients []redis.UniversalClient) error {
	var errs []error
	for _, c := range clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// Ambiguous reports whether a command that failed with err may still have
// been applied: its reply was lost (a timeout, a broken connection, the
// context ending while it was in flight), so the caller cannot know. Redis's
// own error reply and redis.Nil are answers, never ambiguous: the command was
// refused, or found nothing.
func Ambiguous(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) || neverSent(err) {
		return false
	}
	var reply redis.Error
	return !errors.As(err, &reply)
}

// neverSent reports an error that comes before the command leaves the
// client: no connection could be made (refused, unreachable, the dial timed
// out), none was free in the pool, or the client is closed.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" ||
		errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed)
}

// ParseList parses a comma-separated list of host:port nodes, blanks ignored.
func ParseList(s string) ([]string, error) {
	var nodes []string
	for n := range strings.SplitSeq(s, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(n); err != nil {
			return nil, fmt.Errorf("node %q: want host:port", n)
		}
		nodes = append(nodes, n)
	}
	if len(nodes) == 0 {
		return nil, errors.New("want at least one host:port")
	}
	return nodes, nil
}

// NodeName is what a person calls the node at addr (host:port): its host
// when that is a name of its own (Compose's "redis2"), else "redis-PORT",
// the name the local cluster gives the node it starts on that port
// (loopback, an address). The lab's lessons show each Redlock command with
// its node's name, and stop and start the node by that name.
func NodeName(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if host == "" || host == "localhost" || net.ParseIP(host) != nil {
		return "redis-" + port
	}
	return host
}
