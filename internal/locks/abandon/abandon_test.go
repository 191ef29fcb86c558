package abandon_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/abandon"
	setnx "github.com/locklab/locklab/internal/locks/v3_setnx"
	reentrant "github.com/locklab/locklab/internal/locks/v7_reentrant"
	"github.com/locklab/locklab/internal/redisconn"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/redis/go-redis/v9"
)

type tryer interface {
	TryAcquire(ctx context.Context, owner string) (lease.Lease, error)
}

// guards are the single-node locks' one attempt, fenced and not (the fenced
// SET NX is a script, the plain one a SET).
func guards(rdb *redis.Client, key string) map[string]tryer {
	return map[string]tryer{
		"v3":       setnx.New(rdb, setnx.Options{Key: key}),
		"v5":       setnx.New(rdb, setnx.Options{Key: key, TTL: 20 * time.Second, OwnerCheck: true}),
		"v5+fence": setnx.New(rdb, setnx.Options{Key: key, TTL: 20 * time.Second, OwnerCheck: true, Fence: true}),
		"v7":       reentrant.New(rdb, reentrant.Options{Key: key}),
		"v7+fence": reentrant.New(rdb, reentrant.Options{Key: key, Fence: true}),
	}
}

// An acquisition Redis applied but whose reply was lost leaves no lock behind:
// without the clean-up, v3's would stay forever.
func TestLostReplyLeavesNoLock(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	for name := range guards(nil, "") {
		t.Run(name, func(t *testing.T) {
			key := "lock:" + t.Name()
			rdb := srv.Client()
			redistest.LoseReplies(rdb, 1, "set", "evalsha", "eval")
			_, err := guards(rdb, key)[name].TryAcquire(ctx, "A")
			if err == nil || !redisconn.Ambiguous(err) {
				t.Fatalf("TryAcquire with its reply lost: %v, want an ambiguous error", err)
			}
			if n, err := srv.Client().Exists(ctx, key).Result(); err != nil || n != 0 {
				t.Fatalf("the lock is left after a lost reply (exists %d, %v)", n, err)
			}
		})
	}
}

// The clean-up is owner-checked: a lost reply of an attempt that found the
// lock taken leaves the holder's lock alone.
func TestLostReplyKeepsAnotherOwnersLock(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	for name := range guards(nil, "") {
		t.Run(name, func(t *testing.T) {
			key := "lock:" + t.Name()
			holder, err := guards(srv.Client(), key)[name].TryAcquire(ctx, "B")
			if err != nil {
				t.Fatal(err)
			}
			rdb := srv.Client()
			redistest.LoseReplies(rdb, 1, "set", "evalsha", "eval")
			if _, err := guards(rdb, key)[name].TryAcquire(ctx, "A"); err == nil {
				t.Fatal("A took B's lock")
			}
			if err := holder.Release(ctx); err != nil {
				t.Fatalf("B's lock is gone after A's lost reply: %v", err)
			}
		})
	}
}

// A refusal is an answer: nothing to clean up, the error is the caller's.
func TestAnswerIsNotAbandoned(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	if err := rdb.Set(ctx, "lock", "A", 0).Err(); err != nil {
		t.Fatal(err)
	}
	refused := redis.Nil
	if err := abandon.After(ctx, rdb, "lock", "A", refused); !errors.Is(err, redis.Nil) {
		t.Fatalf("After(redis.Nil) = %v", err)
	}
	if v, err := rdb.Get(ctx, "lock").Result(); err != nil || v != "A" {
		t.Fatalf("the lock after an answered attempt: %q, %v; want it untouched", v, err)
	}
}
