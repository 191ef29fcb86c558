package db_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

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
	_, err := b.TryAcquire(ctx, "next")
	if err == nil || errors.Is(err, lease.ErrTaken) {
		t.Fatalf("with the database down: %v, want an error that is not lease.ErrTaken", err)
	}
	// A connection never made: no row to delete after it (Seed's unsent),
	// so an outage does not leave a clean-up running for every failed sale.
	if op := (*net.OpError)(nil); !errors.As(err, &op) || op.Op != "dial" {
		t.Fatalf("with the database down: %v, want a dial error (*net.OpError)", err)
	}
}

// open is db.Open on s's database, its DSN changed by set, closed when the
// test ends.
func open(t *testing.T, s *dbtest.Server, set func(*mysql.Config)) *sql.DB {
	t.Helper()
	c, err := mysql.ParseDSN(s.DSN())
	if err != nil {
		t.Fatal(err)
	}
	set(c)
	pool, err := db.Open(c.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	return pool
}

// A DSN that asks for clientFoundRows does not get it from Open: with it,
// MariaDB counts the held row that an attempt leaves as it was as affected,
// the attempt reads that as its insert, and the unfenced lock has two
// holders, with no error.
func TestOpenForcesClientFoundRowsOff(t *testing.T) {
	s := dbtest.Start(t)
	ctx := context.Background()
	l := db.New(open(t, s, func(c *mysql.Config) { c.ClientFoundRows = true }), db.Options{Key: "lock", TTL: 20 * time.Second})
	first, err := l.TryAcquire(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryAcquire(ctx, "second"); !errors.Is(err, lease.ErrTaken) {
		t.Fatalf("a second taker while the first holds: %v, want lease.ErrTaken (two holders)", err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// Holds are compared on one clock, UTC, whatever each session's time zone:
// a hold taken by a session five hours behind UTC is not expired to one five
// hours ahead, and a hold taken ahead expires on time for a session behind
// (NOW(6), the session's local time, gave away the first at once and kept
// the second ten hours; a daylight-saving change moves NOW(6) the same way,
// by an hour, for every session at once).
func TestHoldsCompareOnUTC(t *testing.T) {
	s := dbtest.Start(t)
	ctx := context.Background()
	zone := func(tz string) *sql.DB {
		pool := open(t, s, func(c *mysql.Config) { c.Params = map[string]string{"time_zone": "'" + tz + "'"} })
		var got string
		if err := pool.QueryRowContext(ctx, "SELECT @@session.time_zone").Scan(&got); err != nil || got != tz {
			t.Fatalf("the session's time zone: %q, %v; want %q", got, err, tz)
		}
		return pool
	}
	west, east := zone("-05:00"), zone("+05:00")
	long := db.Options{Key: "lock", TTL: 20 * time.Second}
	held, err := db.New(west, long).TryAcquire(ctx, "west")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.New(east, long).TryAcquire(ctx, "east"); !errors.Is(err, lease.ErrTaken) {
		t.Fatalf("a hold of 20 s taken in -05:00, tried from +05:00: %v, want lease.ErrTaken (two holders)", err)
	}
	if ok, err := db.Held(ctx, east, "lock"); err != nil || !ok {
		t.Fatalf("Held from +05:00: %v, %v; want held", ok, err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}

	short := db.Options{Key: "lock", TTL: 300 * time.Millisecond}
	if _, err := db.New(east, short).TryAcquire(ctx, "east"); err != nil {
		t.Fatal(err)
	}
	locktest.WaitFor(t, 5*time.Second, "the hold taken in +05:00 expired, seen from -05:00", func() bool {
		ok, err := db.Held(ctx, west, "lock")
		return err == nil && !ok
	})
	if _, err := db.New(west, short).TryAcquire(ctx, "west"); err != nil {
		t.Fatalf("the expired hold, taken over from -05:00: %v", err)
	}
}

// A release whose hold expired is a lease lost, told as such, even when
// nobody has taken the row over yet: the holder counted on a lock that
// anyone could have taken. The row is free to the next taker, with the next
// token.
func TestReleaseAfterExpiryIsLeaseLost(t *testing.T) {
	s := dbtest.Start(t)
	ctx := context.Background()
	pool := s.DB()
	l := db.New(pool, db.Options{Key: "lock", TTL: 200 * time.Millisecond, Fence: true})
	slow, err := l.TryAcquire(ctx, "slow")
	if err != nil {
		t.Fatal(err)
	}
	locktest.WaitFor(t, 5*time.Second, "the hold expired", func() bool {
		ok, err := db.Held(ctx, pool, "lock")
		return err == nil && !ok
	})
	if err := slow.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("the release of an expired hold: %v, want lease.ErrNotHeld (the lease was lost)", err)
	}
	next, err := l.TryAcquire(ctx, "next")
	if err != nil {
		t.Fatalf("after the late release: %v, want the lock", err)
	}
	if next.Token() != slow.Token()+1 {
		t.Errorf("the next token %d after %d, want the next", next.Token(), slow.Token())
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// The seed's release whose count of deleted rows cannot be read fails with
// that error: it is not "not held", which would say the lease had expired.
func TestSeedReleaseRowsUnreadIsAnError(t *testing.T) {
	s := dbtest.Start(t)
	ctx := context.Background()
	l := db.NewSeed(rowsUnread{s.DB()}, db.Options{Key: "lock", TTL: 20 * time.Second})
	held, err := l.TryAcquire(ctx, "owner")
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Release(ctx); !errors.Is(err, errRowsUnread) || errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("release: %v, want the count's error, not lease.ErrNotHeld", err)
	}
}

var errRowsUnread = errors.New("rows affected: unread")

// rowsUnread is a real database whose results cannot say how many rows
// changed.
type rowsUnread struct{ *sql.DB }

func (d rowsUnread) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	res, err := d.DB.ExecContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return unreadResult{res}, nil
}

type unreadResult struct{ sql.Result }

func (unreadResult) RowsAffected() (int64, error) { return 0, errRowsUnread }

// An attempt whose INSERT ran but whose reply was lost is an error (503),
// and its row is deleted by the attempt's owner, even when the database
// loses that DELETE's first replies too: the load that loses one reply
// loses the next (on Compose, a row left this way stopped db-seed on that
// stack for good). Then the next owner takes the lock.
func TestSeedLostInsertReplyIsCleanedUp(t *testing.T) {
	s := dbtest.Start(t)
	ctx := context.Background()
	lossy := &lostReplies{DB: s.DB(), deletes: 2}
	l := db.NewSeed(lossy, db.Options{Key: "lock", TTL: 20 * time.Second})
	if _, err := l.TryAcquire(ctx, "lost"); err == nil || errors.Is(err, lease.ErrTaken) {
		t.Fatalf("an attempt whose reply was lost: %v, want an error that is not lease.ErrTaken", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := s.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM locklab_seed_locks WHERE name = 'lock'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lost attempt's row is still there after 10 s (%d DELETEs refused): the lock is held by nobody, for ever", lossy.refused.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := lossy.refused.Load(); got != 2 {
		t.Fatalf("%d DELETEs refused, want 2 (the test's premise)", got)
	}
	h, err := l.TryAcquire(ctx, "next")
	if err != nil {
		t.Fatalf("the next owner, once the row is gone: %v", err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

var errReplyLost = errors.New("the reply was lost")

// lostReplies is a real database that runs the first INSERT and loses its
// reply, and refuses the first deletes DELETEs without running them.
type lostReplies struct {
	*sql.DB
	deletes  int32
	inserted atomic.Bool
	refused  atomic.Int32
}

func (d *lostReplies) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	switch {
	case strings.Contains(query, "INSERT") && !d.inserted.Load():
		if _, err := d.DB.ExecContext(ctx, query, args...); err != nil {
			return nil, err // the table made first: the attempt tries again
		}
		d.inserted.Store(true)
		return nil, errReplyLost
	case strings.Contains(query, "DELETE") && d.refused.Load() < d.deletes:
		d.refused.Add(1)
		return nil, errReplyLost
	}
	return d.DB.ExecContext(ctx, query, args...)
}
