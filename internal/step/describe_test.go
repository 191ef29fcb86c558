package step_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/locklab/locklab/internal/step"
)

// A lock's owner is shown whole, whoever made it (the store panel names the
// holder by finding it in the sale's steps); a script's source is cut.
func TestDescribeKeepsOwnersWhole(t *testing.T) {
	owner := "MNMzMRnPhwi8LCi485Qjhg" + "043729a1-32c5-44d8-ad40-49b5fa0e45e9:681" // redislock's token, then ours
	got := step.Describe(redis.NewCmd(context.Background(), "evalsha", "80a1b5f2", 1, "inventoryRedisLock", owner, 22, 10000))
	if !strings.Contains(got, owner) {
		t.Fatalf("Describe = %q: the owner %q is cut", got, owner)
	}
	script := strings.Repeat("redis.call('GET', KEYS[1]) ", 10)
	if got := step.Describe(redis.NewCmd(context.Background(), "eval", script, 1, "k")); strings.Contains(got, script) || !strings.Contains(got, "…") {
		t.Fatalf("Describe = %q: a script's source should be cut", got)
	}
}
