package lua_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/lease"
	lua "github.com/locklab/locklab/internal/locks/v6_lua"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// poll is a v6 lock on key with lease ttl, waiting as the tests do.
func poll(rdb *redis.Client, key string, ttl time.Duration) locktest.Locker {
	return locktest.Poll(lua.New(rdb, lua.Options{Key: key, TTL: ttl}))
}

func TestExcludesAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	key := "lock:" + t.Name()
	locktest.Exclusion(t, srv.Client(), poll(srv.Client(), key, 20*time.Second), poll(srv.Client(), key, 20*time.Second))
}

func TestExpiryWithinTTL(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	ttl := 1500 * time.Millisecond
	l, err := lua.New(rdb, lua.Options{Key: "lock", TTL: ttl}).TryAcquire(ctx, "owner")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if pttl := rdb.PTTL(ctx, "lock").Val(); pttl <= 0 || pttl > ttl {
		t.Fatalf("PTTL = %v, want in (0, %v]", pttl, ttl)
	}
}

// recorder is a go-redis hook that records every command Redis executed (an
// EVALSHA refused with NOSCRIPT executed nothing: go-redis then sends EVAL).
type recorder struct {
	mu   sync.Mutex
	cmds []string
}

func (r *recorder) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *recorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (r *recorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
			r.mu.Lock()
			r.cmds = append(r.cmds, strings.ToLower(cmd.Name()))
			r.mu.Unlock()
		}
		return err
	}
}

// The release is one command (a script), so nothing can happen between the
// owner check and the delete; v5 sends GET then DEL.
func TestReleaseIsOneStep(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	rec := &recorder{}
	rdb.AddHook(rec)
	l, err := lua.New(rdb, lua.Options{Key: "lock", TTL: time.Second}).TryAcquire(ctx, "owner")
	if err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	rec.cmds = nil
	rec.mu.Unlock()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if len(rec.cmds) != 1 || (rec.cmds[0] != "evalsha" && rec.cmds[0] != "eval") {
		t.Fatalf("release sent %v, want one EVALSHA or EVAL", rec.cmds)
	}
	if rdb.Exists(ctx, "lock").Val() != 0 {
		t.Fatal("lock still there after release")
	}
}

// v6 is not reentrant: the same owner asking again waits on itself.
func TestNotReentrant(t *testing.T) {
	rdb := redistest.Start(t).Client()
	l := poll(rdb, "lock", 20*time.Second)
	h, err := l.Acquire(context.Background(), "owner")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(context.Background())
	locktest.Waits(t, l, "owner") // the same owner: it waits on itself
}

func TestFencingTokensGrow(t *testing.T) {
	rdb := redistest.Start(t).Client()
	locktest.Tokens(t, locktest.Poll(lua.New(rdb, lua.Options{Key: "lock", TTL: time.Second, Fence: true})))
}

func BenchmarkAcquireRelease(b *testing.B) {
	rdb := redistest.Start(b).Client()
	locktest.BenchAcquireRelease(b, poll(rdb, "bench", 20*time.Second))
}

// The lease expires and a successor takes the lock, either before the release
// (a late release) or inside it, just before the delete (v5's race, which
// package setnx shows deleting the successor's lock). v6 checks the owner in
// the same step as it deletes: the successor keeps its lock either way.
func TestKeepsSuccessorsLock(t *testing.T) {
	for _, during := range []bool{false, true} {
		t.Run(map[bool]string{false: "before release", true: "during release"}[during], func(t *testing.T) {
			rdb := redistest.Start(t).Client()
			ctx := context.Background()
			l := poll(rdb, "lock", 50*time.Millisecond)
			a, err := l.Acquire(ctx, "A")
			if err != nil {
				t.Fatal(err)
			}
			successor := func(context.Context) { locktest.Successor(t, rdb, "lock", l, "B") }
			rctx := ctx
			if during {
				rctx = chaos.With(ctx, chaos.Faults{BeforeDelete: successor})
			} else {
				successor(ctx)
			}
			if err := a.Release(rctx); !errors.Is(err, lease.ErrNotHeld) {
				t.Fatalf("A's late release: err = %v, want ErrNotHeld", err)
			}
			if v := rdb.Get(ctx, "lock").Val(); v != "B" {
				t.Fatalf("lock holds %q after A's release, want B's", v)
			}
		})
	}
}

func TestOneAttempt(t *testing.T) {
	locktest.OneAttempt(t, lua.New(redistest.Start(t).Client(), lua.Options{}))
}
