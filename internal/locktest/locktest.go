// Package locktest holds the checks every guard is put through, against a
// real Redis: mutual exclusion across two independent instances (two
// "replicas" of the service), and the lost update when a guard does not
// exclude across them.
package locktest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/retry"
	"github.com/redis/go-redis/v9"
)

// Locker is a lock under test, its waiting composed (sale.Locker's shape).
type Locker interface {
	Acquire(ctx context.Context, owner string) (lease.Lease, error)
}

// Poll is g waiting by polling every millisecond: a guard under test.
func Poll(g retry.Guard) Locker { return retry.Poll(g, time.Millisecond, nil) }

// Exclusion runs workers goroutines on each of the two guards, each doing
// rounds read-modify-write increments of a counter in rdb under the lock, with
// a pause between the read and the write so that any overlap loses an update.
// It fails the test unless the final count is exact and no two holders ever
// overlapped.
func Exclusion(t *testing.T, rdb *redis.Client, a, b Locker) {
	t.Helper()
	if _, err := exclusion(rdb, "locktest:counter:"+t.Name(), a, b, 30*time.Second, false); err != nil {
		t.Fatal(err)
	}
}

// ExclusionParked is Exclusion for a guard whose waiters may never be woken
// (a library's lost wake-up, a finding to report, not this check's
// concern): an acquisition still waiting after patience gives up its
// increment, and is counted; the count must be exact for the others, and no
// two holders may overlap. It returns how many gave up.
func ExclusionParked(t *testing.T, rdb *redis.Client, a, b Locker, patience time.Duration) (parked int) {
	t.Helper()
	parked, err := exclusion(rdb, "locktest:counter:"+t.Name(), a, b, patience, true)
	if err != nil {
		t.Fatal(err)
	}
	return parked
}

func exclusion(rdb *redis.Client, counter string, a, b Locker, patience time.Duration, allowParked bool) (int, error) {
	const workers, rounds = 4, 15
	ctx := context.Background()
	if err := rdb.Del(ctx, counter).Err(); err != nil {
		return 0, err
	}
	var holders, maxHolders, parked atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers)
	for gi, g := range []Locker{a, b} {
		for w := range workers {
			wg.Go(func() {
				for r := range rounds {
					owner := fmt.Sprintf("replica%d-worker%d-round%d", gi, w, r)
					err := increment(ctx, rdb, g, owner, counter, patience, &holders, &maxHolders)
					if allowParked && errors.Is(err, context.DeadlineExceeded) {
						parked.Add(1)
						continue
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	got, err := rdb.Get(ctx, counter).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, err
	}
	if want := 2*workers*rounds - int(parked.Load()); got != want || maxHolders.Load() != 1 {
		return 0, fmt.Errorf("counter = %d, want %d; most holders at once = %d, want 1", got, want, maxHolders.Load())
	}
	return int(parked.Load()), nil
}

func increment(ctx context.Context, rdb *redis.Client, g Locker, owner, counter string, patience time.Duration, holders, maxHolders *atomic.Int32) error {
	actx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	l, err := g.Acquire(actx, owner)
	if err != nil {
		return fmt.Errorf("acquire %s: %w", owner, err)
	}
	h := holders.Add(1)
	for m := maxHolders.Load(); h > m && !maxHolders.CompareAndSwap(m, h); m = maxHolders.Load() {
	}
	n, err := rdb.Get(ctx, counter).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	time.Sleep(200 * time.Microsecond) // widen the read-modify-write window
	if err := rdb.Set(ctx, counter, n+1, 0).Err(); err != nil {
		return err
	}
	holders.Add(-1)
	if err := l.Release(ctx); err != nil {
		return fmt.Errorf("release %s: %w", owner, err)
	}
	return nil
}

// LostUpdate shows a guard that does not exclude across instances: a and b
// each grant their lock at the same time, both holders read the counter, then
// both write it, and two increments leave it at 1. It fails the test if the
// second guard makes its caller wait or the update is not lost.
func LostUpdate(t *testing.T, rdb *redis.Client, a, b Locker) {
	t.Helper()
	ctx := context.Background()
	counter := "locktest:lost:" + t.Name()
	if err := rdb.Set(ctx, counter, 0, 0).Err(); err != nil {
		t.Fatal(err)
	}
	var reads [2]int
	var leases [2]lease.Lease
	for i, g := range []Locker{a, b} {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		l, err := g.Acquire(actx, "owner"+strconv.Itoa(i))
		cancel()
		if err != nil {
			t.Fatalf("guard %d did not grant its lock while the other guard's was held: %v", i, err)
		}
		leases[i] = l
		if reads[i], err = rdb.Get(ctx, counter).Int(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if err := rdb.Set(ctx, counter, reads[i]+1, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := leases[i].Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := rdb.Get(ctx, counter).Int(); err != nil || got != 1 {
		t.Fatalf("after two overlapping increments counter = %d (err %v), want 1: the lost update", got, err)
	}
}

// Tokens asserts that successive holders of g get strictly increasing
// fencing tokens.
func Tokens(t *testing.T, g Locker) {
	t.Helper()
	ctx := context.Background()
	var last int64
	for i := range 5 {
		l, err := g.Acquire(ctx, "owner"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		if l.Token() <= last {
			t.Fatalf("holder %d got token %d after %d; tokens must grow", i, l.Token(), last)
		}
		last = l.Token()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
