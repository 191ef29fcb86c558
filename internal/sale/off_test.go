package sale_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/lease"
	lua "github.com/locklab/locklab/internal/locks/v6_lua"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/internal/sale"
	"github.com/redis/go-redis/v9"
)

// Each fix switched off (the off= hook, make mutations) lets its flaw
// through where the fix stops it: the mutations' cells could fail.

// Fencing off: the frozen holder's stale write lands (stock 9 for two
// sales), where with fencing on it is refused; its own domain's key is gone
// after the sale.
func TestFenceSwitchedOff(t *testing.T) {
	after, errA := pauseHolder(t, true, chaos.Off{Fence: true})
	if errA != nil || after != 9 {
		t.Fatalf("A with fencing off: err %v, stock %d; want A to sell too and the stock at 9 (the oversell)", errA, after)
	}
}

// The fence switched off leaves no key of its own domain behind.
func TestFenceSwitchedOffLeavesNoKey(t *testing.T) {
	rdb := redistest.Start(t).Client()
	setStock(t, rdb, 3)
	ctx := chaos.With(context.Background(), chaos.Faults{Off: chaos.Off{Fence: true}})
	if _, err := newService(rdb, time.Second).Sell(ctx, sale.Method{Name: "v6", Lock: v6Fenced(rdb), Fence: "redis"}); err != nil {
		t.Fatal(err)
	}
	keys, err := rdb.Keys(context.Background(), key+":fence:*").Result()
	if err != nil || len(keys) != 0 || stock(t, rdb) != 2 {
		t.Fatalf("fence keys %v (err %v), stock %d; want none and 2", keys, err, stock(t, rdb))
	}
}

// The lock switched off grants whoever asks, at once: a sale sells while
// another owner holds the lock, where with the lock on it times out; what
// its background ask got is released (the other's key stays).
func TestLockSwitchedOff(t *testing.T) {
	rdb := redistest.Start(t).Client()
	setStock(t, rdb, 5)
	g := v6(rdb, "lock", 20*time.Second)
	held, err := g.Acquire(context.Background(), "someone else")
	if err != nil {
		t.Fatal(err)
	}
	svc := newService(rdb, 300*time.Millisecond) // its background ask waits that long: the lock is held
	off := chaos.With(context.Background(), chaos.Faults{Off: chaos.Off{Lock: true}})
	for _, fence := range []string{"", "redis"} { // a fenced sale without the lock runs unfenced
		if _, err := svc.Sell(off, sale.Method{Name: "v6", Lock: g, Fence: fence}); err != nil {
			t.Fatalf("fence %q: a sale with the lock switched off: %v, want it sold", fence, err)
		}
	}
	if stock(t, rdb) != 3 || rdb.Get(context.Background(), "lock").Val() == "" {
		t.Fatalf("stock %d, lock %q; want 3 and the other owner's lock", stock(t, rdb), rdb.Get(context.Background(), "lock").Val())
	}
	if _, err := newService(rdb, 100*time.Millisecond).Sell(context.Background(), sale.Method{Name: "v6", Lock: g}); !errors.Is(err, sale.ErrLockTimeout) {
		t.Fatalf("with the lock on: %v, want ErrLockTimeout", err)
	}
	// With the lock free, the background ask takes it and the release frees it.
	held.Release(context.Background())
	if _, err := svc.Sell(off, sale.Method{Name: "v6", Lock: g}); err != nil || rdb.Exists(context.Background(), "lock").Val() != 0 {
		t.Fatalf("a sale with the lock off, the lock free: %v, lock left: %d; want sold and no lock left", err, rdb.Exists(context.Background(), "lock").Val())
	}
}

// The write's acknowledgement switched off: a sale that asks for one
// replica's acknowledgement of a node with none sells (200) instead of
// answering indeterminate; the lock's switched off changes nothing there.
func TestAckSwitchedOff(t *testing.T) {
	rdb := redistest.Start(t).Client()
	setStock(t, rdb, 5)
	svc := newService(rdb, time.Second)
	m := sale.Method{Name: "atomic", Atomic: true}
	ack := chaos.Faults{ReplicaAck: 1}
	if _, err := svc.Sell(chaos.With(context.Background(), ack), m); !errors.Is(err, sale.ErrIndeterminate) {
		t.Fatalf("with the acknowledgement: %v, want ErrIndeterminate (no replica)", err)
	}
	ack.Off.LockAck = true // the lock's: atomic takes none, so still indeterminate
	if _, err := svc.Sell(chaos.With(context.Background(), ack), m); !errors.Is(err, sale.ErrIndeterminate) {
		t.Fatalf("with only the lock's acknowledgement off: %v, want ErrIndeterminate", err)
	}
	ack.Off = chaos.Off{WriteAck: true}
	if _, err := svc.Sell(chaos.With(context.Background(), ack), m); err != nil {
		t.Fatalf("with the write's acknowledgement off: %v, want it sold", err)
	}
}

// The lost lease's check switched off: the sale writes though it knows its
// lease lost.
func TestLeaseCheckSwitchedOff(t *testing.T) {
	rdb := redistest.Start(t).Client()
	setStock(t, rdb, 5)
	lost := make(chan struct{})
	close(lost)
	g := lockerFunc(func(context.Context, string) (lease.Lease, error) {
		return lease.New(func(context.Context) error { return nil }, 0, lost), nil
	})
	svc := newService(rdb, time.Second)
	if _, err := svc.Sell(context.Background(), sale.Method{Name: "lost", Lock: g}); !errors.Is(err, sale.ErrLeaseLost) {
		t.Fatalf("with the check: %v, want ErrLeaseLost", err)
	}
	off := chaos.With(context.Background(), chaos.Faults{Off: chaos.Off{LeaseCheck: true}})
	if _, err := svc.Sell(off, sale.Method{Name: "lost", Lock: g}); err != nil || stock(t, rdb) != 4 {
		t.Fatalf("with the check off: %v, stock %d; want it sold, 4", err, stock(t, rdb))
	}
}

// lockerFunc is a Locker from a function: a lease of the test's making.
type lockerFunc func(ctx context.Context, owner string) (lease.Lease, error)

func (f lockerFunc) Acquire(ctx context.Context, owner string) (lease.Lease, error) {
	return f(ctx, owner)
}

// v6Fenced is a fenced v6 lock on "lock", waiting as the tests do.
func v6Fenced(rdb *redis.Client) sale.Locker {
	return locktest.Poll(lua.New(rdb, lua.Options{Key: "lock", TTL: 20 * time.Second, Fence: true}))
}
