package db

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/locklab/locklab/internal/lease"
)

//go:embed seed_schema.sql
var seedSchema string

//go:embed seed_acquire.sql
var seedAcquireSQL string

//go:embed seed_release.sql
var seedReleaseSQL string

// Seed is the database lock exactly as seed 004 builds it (-lock db-seed):
// an INSERT takes it, an owner-checked DELETE gives it back, and the row's
// expiry waits for a cleanup that nothing runs. A holder that dies keeps
// the lock for ever: every later sale waits until its deadline (the
// tutorial's v3 on a database). Its one bug is not copied: the seed reads
// every INSERT error as "taken"; here only a duplicate key is, and any other
// error is returned (the sale answers 503, never waits on a database that
// is down). No fencing token: the seed's row has none.
type Seed struct {
	db   Execer
	opts Options
	// forgetting lets one forget talk to the database at a time: after an
	// outage, every sale that failed meanwhile has one waiting, and all at
	// once would open a connection each.
	forgetting chan struct{}
}

// Execer is the part of a *sql.DB the seed's lock uses: a test wraps it to
// make the database's answers fail.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// NewSeed returns the seed's lock on db (Options.Fence is ignored).
func NewSeed(db Execer, opts Options) *Seed {
	return &Seed{db: db, opts: opts.withDefaults(), forgetting: make(chan struct{}, 1)}
}

// TryAcquire inserts the lock's row for owner, or answers lease.ErrTaken
// when it is there.
func (s *Seed) TryAcquire(ctx context.Context, owner string) (lease.Lease, error) {
	// lesson:begin db-seed
	_, err := s.db.ExecContext(ctx, seedAcquireSQL, s.opts.Key, owner, s.opts.TTL.Microseconds())
	// lesson:end
	if noTable(err) {
		if _, err = s.db.ExecContext(ctx, seedSchema); err == nil {
			_, err = s.db.ExecContext(ctx, seedAcquireSQL, s.opts.Key, owner, s.opts.TTL.Microseconds())
		}
	}
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me) && me.Number == 1062, contended(err): // ER_DUP_ENTRY: the row is there
		return nil, lease.ErrTaken
	case err != nil:
		// A reply lost after the INSERT ran leaves a row nobody holds, for
		// ever here: delete it, by owner (unique to this attempt: the sale
		// makes one per sale, and an error ends its wait).
		if !unsent(err) {
			go s.forget(owner)
		}
		return nil, fmt.Errorf("db-seed: acquire %s: %w", s.opts.Key, err)
	}
	return lease.New(func(ctx context.Context) error { return s.release(ctx, owner) }, 0, nil), nil
}

// forgetFor bounds forget: long past a database's overload, short of
// keeping a goroutine for a database that is gone.
const forgetFor = time.Minute

// forget deletes owner's row, left by an attempt whose reply was lost (or
// finds none: the INSERT never ran), trying again until the database
// answers, at most forgetFor. One try was not enough: the load that loses an
// INSERT's reply loses the DELETE's too (seen on Compose: MariaDB's reads
// timing out at 5 s under the default load test, the row left, and db-seed
// selling nothing on that stack again). The seed's flaw is a holder that
// dies; this one is alive and cleans up after itself.
func (s *Seed) forget(owner string) {
	ctx, cancel := context.WithTimeout(context.Background(), forgetFor)
	defer cancel()
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		select {
		case <-ctx.Done():
			return
		case s.forgetting <- struct{}{}:
		}
		tctx, tcancel := context.WithTimeout(ctx, 5*time.Second)
		err := s.release(tctx, owner)
		tcancel()
		<-s.forgetting
		if err == nil || errors.Is(err, lease.ErrNotHeld) {
			return
		}
		select {
		case <-ctx.Done():
			return // the row, if any, stays: the seed's own flaw from here
		case <-time.After(wait):
		}
	}
}

// unsent reports whether err is a connection to the database that could
// not be made: the INSERT was never sent, and left no row.
func unsent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// release deletes the row if owner holds it.
func (s *Seed) release(ctx context.Context, owner string) error {
	// lesson:begin db-seed
	return releaseRow(ctx, s.db, "db-seed", seedReleaseSQL, s.opts.Key, owner)
	// lesson:end
}
