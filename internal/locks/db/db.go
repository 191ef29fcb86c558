// Package db is the database family of seed 004: a lock table on a
// MySQL-compatible server (MariaDB), one row per lock, the stock staying in
// Redis as in every other version.
//
// The seed's recipe takes the lock with an INSERT (a duplicate key: taken)
// and gives it back with an owner-checked DELETE, and leaves the rows whose
// expiry has passed to "periodic cleanup": a holder that dies keeps the lock
// until someone cleans up. Here one statement (acquire.sql) inserts the row
// or takes it over once its hold has expired, so the crash ends with the
// hold and two takers of one expired row cannot both win (the row's lock
// in InnoDB orders them). The row is never deleted: a release empties it,
// and its token, incremented by every acquisition, is the fencing token.
//
// Not copied from the seed either: its TryLock reads every INSERT error as
// "taken", so a database that is down looks like a busy lock and the sale
// waits for nothing; here only "held by another" is lease.ErrTaken, and any
// other error is returned (the sale answers 503 unavailable).
//
// What it still gets wrong: the hold is a lease on the database's clock,
// like v4-v7's on Redis's. A holder slower than its hold loses the lock
// without knowing and writes after its successor, unless the stock checks
// its token. And the database is one node: it down, nobody sells.
package db

import (
	"cmp"
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/step"
)

//go:embed schema.sql
var schema string

//go:embed acquire.sql
var acquireSQL string

//go:embed release.sql
var releaseSQL string

// Options configure a Locker. The zero value is a 20 s hold on "lock".
type Options struct {
	Key string        // the lock's name: its row
	TTL time.Duration // the hold; default 20 s
	// Fence says that the lease carries the row's token (the stock checks
	// it); without it the token is 0, as for every unfenced version.
	Fence bool
}

// Locker takes and releases the lock in the table.
type Locker struct {
	db   *sql.DB
	opts Options
}

// Open is a pool of connections to the MariaDB at dsn, as the lock uses it:
// it connects lazily (a database that is down fails each attempt, not the
// start), every call bounded (connect 2 s, each read and write 5 s) unless
// dsn says otherwise, and idle connections kept for the pollers, who each
// make a statement every few milliseconds.
//
// One setting of dsn is overridden: clientFoundRows. With it, MariaDB counts
// a row found as affected, so an acquisition that finds the lock held (a
// duplicate row left unchanged) reads as an insert, and a second holder is
// handed the unfenced lock with no error.
func Open(dsn string) (*sql.DB, error) { return open(dsn, nil) }

// open is Open's pool, its settings changed by adjust (nil: none) before it
// connects.
func open(dsn string, adjust func(*mysql.Config)) (*sql.DB, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	c.ClientFoundRows = false
	c.Timeout = cmp.Or(c.Timeout, 2*time.Second)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, 5*time.Second)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, 5*time.Second)
	if adjust != nil {
		adjust(c)
	}
	conn, err := mysql.NewConnector(c)
	if err != nil {
		return nil, err
	}
	// The step gate is in it: a sale the lab steps stops before each
	// statement; any other pays one context lookup.
	db := sql.OpenDB(step.Connector(conn))
	db.SetMaxIdleConns(64)
	db.SetConnMaxIdleTime(time.Minute)
	return db, nil
}

// New returns a Locker on db, opened by Open (or with clientFoundRows off:
// see Open). The table is made by Setup, or by the first attempt that finds
// it missing.
func New(db *sql.DB, opts Options) *Locker {
	return &Locker{db: db, opts: opts.withDefaults()}
}

// withDefaults is opts with every zero field set to its default.
func (opts Options) withDefaults() Options {
	if opts.Key == "" {
		opts.Key = "lock"
	}
	if opts.TTL <= 0 {
		opts.TTL = 20 * time.Second
	}
	return opts
}

// Setup makes the lock table when it is missing.
func Setup(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("db: lock table: %w", err)
	}
	return nil
}

// TryAcquire makes one attempt: the lock for owner, or lease.ErrTaken when
// another holds it, or the database's error.
func (l *Locker) TryAcquire(ctx context.Context, owner string) (lease.Lease, error) {
	// lesson:begin db
	res, err := l.db.ExecContext(ctx, acquireSQL, l.opts.Key, owner, l.opts.TTL.Microseconds())
	// lesson:end
	if noTable(err) { // a fresh database: make the table, then try again
		if err = Setup(ctx, l.db); err == nil {
			res, err = l.db.ExecContext(ctx, acquireSQL, l.opts.Key, owner, l.opts.TTL.Microseconds())
		}
	}
	if contended(err) {
		return nil, lease.ErrTaken
	}
	if err != nil {
		// A reply lost after the statement ran may have given owner the
		// lock: give it back, by owner, so that nobody holds it for nothing
		// until it expires.
		l.abandon(owner)
		return nil, fmt.Errorf("db: acquire %s: %w", l.opts.Key, err)
	}
	rows, err := res.RowsAffected()
	if err != nil {
		return nil, fmt.Errorf("db: acquire %s: %w", l.opts.Key, err)
	}
	if rows == 0 {
		return nil, lease.ErrTaken
	}
	var token int64
	if l.opts.Fence {
		if token, err = res.LastInsertId(); err != nil || token <= 0 {
			l.abandon(owner)
			return nil, fmt.Errorf("db: acquire %s: no token (%d): %w", l.opts.Key, token, err)
		}
	}
	// Never known lost, as v4-v6's on Redis: the holder does not watch its
	// hold run out (the lesson of the slow holder).
	return lease.New(func(ctx context.Context) error { return l.release(ctx, owner) }, token, nil), nil
}

// contended reports that InnoDB gave up the statement for another
// transaction on the same row: a deadlock it broke by rolling this one back
// (ER_LOCK_DEADLOCK: two inserts of one key and a delete can make one), or a
// lock wait that timed out. Nothing was changed, and another owner is taking
// or giving back the lock: the attempt found it taken, and the next one
// tries again.
func contended(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}

// noTable reports MariaDB's "table doesn't exist" (ER_NO_SUCH_TABLE).
func noTable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1146
}

// release gives the lock back if owner still holds it, or answers
// lease.ErrNotHeld: another holds it, or owner's hold has expired (whether
// or not another took it over since, the lease was lost while its holder
// still counted on it).
func (l *Locker) release(ctx context.Context, owner string) error {
	// lesson:begin db
	return releaseRow(ctx, l.db, "db", releaseSQL, l.opts.Key, owner)
	// lesson:end
}

// releaseRow runs stmt, an owner-checked release of key's lock named by
// version in errors: one row changed is a release, none lease.ErrNotHeld.
// A count of rows that could not be read is an error, not "not held": it
// says nothing about who holds the lock.
func releaseRow(ctx context.Context, db Execer, version, stmt, key, owner string) error {
	res, err := db.ExecContext(ctx, stmt, key, owner)
	if err != nil {
		return fmt.Errorf("%s: release %s: %w", version, key, err)
	}
	rows, err := res.RowsAffected()
	switch {
	case err != nil:
		return fmt.Errorf("%s: release %s: %w", version, key, err)
	case rows == 0:
		return lease.ErrNotHeld
	}
	return nil
}

// abandon releases owner's hold, if the failed attempt made one, on its own
// short deadline (the request's may be what ended).
func (l *Locker) abandon(owner string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := l.release(ctx, owner); err != nil && !errors.Is(err, lease.ErrNotHeld) {
		_ = err // the hold, if any, expires with its TTL
	}
}
