package redisconn_test

import (
	"context"
	"strings"
	"testing"

	"github.com/locklab/locklab/internal/redisconn"
	"github.com/locklab/locklab/internal/redistest"
)

// Connecting with the service's options draws no error reply from Redis:
// every error a client meets is one it sees and handles.
func TestConnectingDrawsNoErrorReply(t *testing.T) {
	s := redistest.Start(t)
	c := s.Client()
	ctx := context.Background()
	for range 3 { // each holds its own connection until closed: three connects
		conn := c.Conn()
		defer conn.Close()
		if err := conn.Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.PoolStats().TotalConns; n < 3 {
		t.Fatalf("%d connections opened, want 3", n)
	}
	info, err := c.Info(ctx, "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_error_replies:"); ok && v != "0" {
			errs, _ := c.Info(ctx, "errorstats").Result()
			t.Fatalf("Redis sent %s error replies to a client that only connected and wrote:\n%s", v, errs)
		}
	}
}

// A node is named as the local cluster names the one it starts there
// (redis-PORT, for loopback and addresses), or by its own host name
// (Compose's services): the lessons find the node to stop by that name.
func TestNodeName(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:6382": "redis-6382", "localhost:6381": "redis-6381", "[::1]:6383": "redis-6383",
		"redis2:6379": "redis2", "bad": "bad",
	} {
		if got := redisconn.NodeName(addr); got != want {
			t.Errorf("NodeName(%q) = %q, want %q", addr, got, want)
		}
	}
}
