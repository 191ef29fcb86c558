package db_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/dbtest"
	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/db"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
)

func locker(t *testing.T, s *dbtest.Server, opts db.Options) *db.Locker {
	t.Helper()
	return db.New(s.DB(), opts) // its first attempt makes the table
}

// Two lockers on two connection pools, as two replicas: one holder at a
// time, a nested acquisition waits on itself, tokens grow.
func TestExcludes(t *testing.T) {
	s := dbtest.Start(t)
	rdb := redistest.Start(t).Client()
	opts := db.Options{Key: "lock", TTL: 20 * time.Second}
	a, b := locker(t, s, opts), locker(t, s, opts)
	locktest.Exclusion(t, rdb, locktest.Poll(a), locktest.Poll(b))
	locktest.OneAttempt(t, a)
	held, err := a.TryAcquire(context.Background(), "owner")
	if err != nil {
		t.Fatal(err)
	}
	locktest.Waits(t, locktest.Poll(a), "owner") // not reentrant
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	locktest.Tokens(t, locktest.Poll(locker(t, s, db.Options{Key: "fenced", TTL: 20 * time.Second, Fence: true})))
}

// A holder that dies keeps its row, but only for its hold: the next taker
// takes it over, with the next token, and the dead holder's release is
// refused (the seed leaves that row to "periodic cleanup", and every later
// sale waits for it).
func TestExpiredHoldIsTakenOver(t *testing.T) {
	s := dbtest.Start(t)
	ctx := context.Background()
	l := locker(t, s, db.Options{Key: "lock", TTL: 300 * time.Millisecond, Fence: true})
	dead, err := l.TryAcquire(ctx, "dead")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryAcquire(ctx, "next"); !errors.Is(err, lease.ErrTaken) {
		t.Fatalf("while held: %v, want lease.ErrTaken", err)
	}
	var next lease.Lease
	locktest.WaitFor(t, 5*time.Second, "the expired hold taken over", func() bool {
		next, err = l.TryAcquire(ctx, "next")
		return err == nil
	})
	if next.Token() != dead.Token()+1 {
		t.Errorf("takeover token %d after %d, want the next", next.Token(), dead.Token())
	}
	if err := dead.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("the dead holder's late release: %v, want lease.ErrNotHeld (it must not free its successor's lock)", err)
	}
	if _, err := l.TryAcquire(ctx, "third"); !errors.Is(err, lease.ErrTaken) {
		t.Errorf("after the late release: %v, want still taken by its successor", err)
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// Many takers of one expired row at once: exactly one wins it.
func TestOneTakerOfAnExpiredRow(t *testing.T) {
	s := dbtest.Start(t)
	ctx := context.Background()
	const takers = 16
	var ls []*db.Locker
	for range takers {
		ls = append(ls, locker(t, s, db.Options{Key: "lock", TTL: 200 * time.Millisecond}))
	}
	for round := range 5 {
		if _, err := ls[0].TryAcquire(ctx, "dead"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(250 * time.Millisecond) // the hold's own expiry: what is under test
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for i, l := range ls {
			wg.Go(func() {
				if _, err := l.TryAcquire(ctx, "taker"+string(rune('a'+i))); err == nil {
					mu.Lock()
					won++
					mu.Unlock()
				} else if !errors.Is(err, lease.ErrTaken) {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("round %d: %d takers won the expired row, want exactly 1", round, won)
		}
		time.Sleep(250 * time.Millisecond) // the winner's hold expires too, for the next round
	}
}

// A database that is down is not a taken lock: the attempt says so at once
// (the seed's TryLock read every error as "taken", and the sale waited for
// nothing), and once it is back the lock works again.
func TestDatabaseDownIsAnError(t *testing.T) {
	s := dbtest.Start(t)
	ctx := context.Background()
	l := locker(t, s, db.Options{Key: "lock", TTL: 20 * time.Second})
	s.Stop()
	start := time.Now()
	_, err := l.TryAcquire(ctx, "owner")
	if err == nil || errors.Is(err, lease.ErrTaken) {
		t.Fatalf("with the database down: %v, want an error that is not lease.ErrTaken", err)
	}
	t.Logf("database down: %v (after %s)", err, time.Since(start).Round(time.Millisecond))
	s.Restart()
	h, err := l.TryAcquire(ctx, "owner")
	if err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// The seed's form: one holder at a time; a holder that dies keeps the lock
// past its row's expiry (nothing cleans up), so every later attempt is
// refused; a database that is down is an error, not a taken lock.
func TestSeedDeadHolderKeepsTheLock(t *testing.T) {
	s := dbtest.Start(t)
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	opts := db.Options{Key: "lock", TTL: 100 * time.Millisecond}
	a, b := db.NewSeed(s.DB(), opts), db.NewSeed(s.DB(), opts)
	locktest.Exclusion(t, rdb, locktest.Poll(a), locktest.Poll(b))
	if _, err := a.TryAcquire(ctx, "dead"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // three times the row's expiry: what is under test
	if _, err := b.TryAcquire(ctx, "next"); !errors.Is(err, lease.ErrTaken) {
		t.Fatalf("after the dead holder's expiry: %v, want lease.ErrTaken (the seed never takes an expired row over)", err)
	}
	s.Stop()
	if _, err := b.TryAcquire(ctx, "next"); err == nil || errors.Is(err, lease.ErrTaken) {
		t.Fatalf("with the database down: %v, want an error that is not lease.ErrTaken", err)
	}
}
