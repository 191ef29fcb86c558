// Package probe asks the stack's processes what they are (a ZooKeeper
// member's mode, what a sentinel knows), and names what the cluster makes
// and the scenarios look for (a fault proxy). It links no lock and no
// driver beyond go-redis: the cluster, the scenarios and the tests share it.
package probe

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ZKMode is what the member at addr says it is: "leader", "follower" or
// "standalone" while it serves clients; an error when it does not answer or
// serves nobody (a member without a quorum says "not currently serving").
// It asks srvr, one of the four-letter words (go-zookeeper's FLWSrvr cannot
// parse the version line of Debian's build).
func ZKMode(addr string, timeout time.Duration) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	if _, err := conn.Write([]byte("srvr")); err != nil {
		return "", err
	}
	raw, err := io.ReadAll(io.LimitReader(conn, 64<<10))
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(raw)) {
		if mode, ok := strings.CutPrefix(strings.TrimSpace(line), "Mode: "); ok {
			return mode, nil
		}
	}
	return "", fmt.Errorf("zookeeper %s: %s", addr, strings.TrimSpace(string(raw)))
}

// SentinelKnows reports whether the sentinel c knows master's replicas and
// peers (other sentinels), as many as given: what a failover needs, at start
// and again after SENTINEL RESET.
func SentinelKnows(ctx context.Context, c *redis.SentinelClient, master string, replicas, peers int) bool {
	r, err1 := c.Replicas(ctx, master).Result()
	p, err2 := c.Sentinels(ctx, master).Result()
	return err1 == nil && err2 == nil && len(r) == replicas && len(p) == peers
}

// FaultProxyName is the name of the proxy that carries replica's traffic to
// node.
func FaultProxyName(replica, node string) string { return replica + ">" + node }
