package redisconn_test

import (
	"context"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redisconn"
	"github.com/locklab/locklab/internal/redistest"
)

// The failover client writes to the primary Sentinel names; once the primary
// is killed and Sentinel has promoted its replica, the same client writes to
// the promoted replica, with nothing told but the sentinels' addresses: what
// a replica started with -sentinel does.
func TestFailoverClientFollowsSentinel(t *testing.T) {
	const master = "locklab"
	primary := redistest.Start(t)
	replica := redistest.StartReplica(t, primary)
	sentinels := redistest.StartSentinels(t, primary, master, 1)
	ctx := context.Background()
	c := redisconn.NewFailover(master, sentinels, "")
	t.Cleanup(func() { c.Close() })
	if err := c.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := primary.Client().Get(ctx, "before").Result(); err != nil || got != "1" {
		t.Fatalf("the primary has %q (%v), want the client's write", got, err)
	}

	primary.Stop() // a crash: SIGKILL
	redistest.WaitPromoted(t, sentinels[0], master, replica)
	// The client learns the new primary when its connections to the old
	// one fail: a write may fail once or twice before it does.
	locktest.WaitFor(t, 10*time.Second, "a write through the failover client", func() bool {
		return c.Set(ctx, "after", "2", 0).Err() == nil
	})
	if got, err := replica.Client().Get(ctx, "after").Result(); err != nil || got != "2" {
		t.Fatalf("the promoted replica has %q (%v), want the client's write after the failover", got, err)
	}
}
