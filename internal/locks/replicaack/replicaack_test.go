package replicaack_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/locks/replicaack"
	lua "github.com/locklab/locklab/internal/locks/v6_lua"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
)

// A primary with one asynchronous replica, on real Redis: with the replica
// in sync an acquisition is acknowledged and kept; with it gone, the
// acquisition is given up (the lock released) and the error says why; and
// with no acknowledgement asked for, nothing waits.
func TestAcknowledged(t *testing.T) {
	ctx := context.Background()
	primary := redistest.Start(t)
	replica := redistest.StartReplica(t, primary)
	rdb := primary.Client()
	l := replicaack.Wrap(locktest.Poll(lua.New(rdb, lua.Options{Key: "lock", TTL: 10 * time.Second})), rdb, "lock:ack", 1)

	held, err := l.Acquire(ctx, "a")
	if err != nil {
		t.Fatalf("with the replica in sync: %v", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}

	replica.Stop()
	start := time.Now()
	_, err = l.Acquire(ctx, "b")
	if !errors.Is(err, replicaack.ErrNotAcknowledged) || !strings.Contains(err.Error(), "0 of 1") {
		t.Fatalf("with the replica gone: %v, want ErrNotAcknowledged (0 of 1)", err)
	}
	if took := time.Since(start); took < replicaack.DefaultTimeout {
		t.Fatalf("gave up after %s, before WAIT's timeout", took)
	}
	if n := rdb.Exists(ctx, "lock").Val(); n != 0 {
		t.Fatal("an unacknowledged lock was kept")
	}

	// Not asked (0), or asked by the request's hook only.
	plain := replicaack.Wrap(locktest.Poll(lua.New(rdb, lua.Options{Key: "lock", TTL: 10 * time.Second})), rdb, "lock:ack", 0)
	held, err = plain.Acquire(ctx, "c")
	if err != nil {
		t.Fatalf("with no acknowledgement asked: %v", err)
	}
	_ = held.Release(ctx)
	if _, err := plain.Acquire(chaos.With(ctx, chaos.Faults{ReplicaAck: 1}), "d"); !errors.Is(err, replicaack.ErrNotAcknowledged) {
		t.Fatalf("with replica_ack=1 from the request: %v, want ErrNotAcknowledged", err)
	}
}

// The lock's acknowledgement switched off (off=lock-ack, make mutations):
// with no replica to acknowledge, the acquisition is kept at once; the
// write's switched off (off=write-ack) leaves the lock's in place.
func TestLockAckSwitchedOff(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client() // no replica: nothing can acknowledge
	l := replicaack.Wrap(locktest.Poll(lua.New(rdb, lua.Options{Key: "lock", TTL: 10 * time.Second})), rdb, "lock:ack", 1)
	if _, err := l.Acquire(chaos.With(ctx, chaos.Faults{Off: chaos.Off{WriteAck: true}}), "a"); !errors.Is(err, replicaack.ErrNotAcknowledged) {
		t.Fatalf("with only the write's acknowledgement off: %v, want ErrNotAcknowledged", err)
	}
	held, err := l.Acquire(chaos.With(ctx, chaos.Faults{Off: chaos.Off{LockAck: true}}), "b")
	if err != nil {
		t.Fatalf("with the lock's acknowledgement off: %v, want the lock", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
