package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/locklab/locklab/internal/lease"
)

//go:embed getlock_schema.sql
var getLockSchema string

//go:embed getlock_token.sql
var getLockTokenSQL string

// GetLock is seed 004's other database lock (-lock db-getlock): MariaDB's
// named locks, GET_LOCK and RELEASE_LOCK. A named lock belongs to the
// connection that took it, so each acquisition takes a connection of its
// own from the pool (OpenHolds) and keeps it for the whole hold:
//
//   - Waiting is the server's: GET_LOCK waits for the lock until a timeout,
//     here the acquisition's deadline (less a margin, so the server answers
//     before the context ends). No polling: a release wakes a waiter.
//   - A holder that dies frees the lock with its connection, at once when
//     its process is killed (the kernel closes the socket), as a ZooKeeper
//     session ends; nothing expires, so there is no lease to run out.
//   - A waiter that gives up before its deadline (its request cancelled)
//     ends its connection with KILL CONNECTION: closing the socket ends a
//     wait in GET_LOCK only when the server next looks, about a second
//     later (measured on MariaDB 10.11; the KILL took 2-6 ms), and in that
//     second a release would hand the lock to a connection nobody reads.
//   - A hold whose release fails is never given back to the pool holding
//     the lock: its connection is closed (and killed), which frees it.
//
// What it gets wrong, by design: there is no lease. A holder that is paused
// (SIGSTOP, a GC pause) keeps its connection, so every other sale waits
// until it resumes or its deadline; and a holder whose connection is cut
// (KILL, a network failure, the server's wait_timeout) loses the lock at
// once while it still works. The holder checks its connection every Check
// (a ping) and its lease reports Lost when it finds it broken, but until
// then it believes it holds: only the token (Fence) stops its late write.
//
// The token: GET_LOCK has none, so a fenced acquisition bumps a counter row
// (getlock_token.sql) on the holding connection once it holds the lock. A
// successor obtains the lock only after this connection is gone, after the
// bump committed, so its token is larger.
type GetLock struct {
	db    *sql.DB
	name  string
	fence bool
	check time.Duration
}

// GetLockOptions configure a GetLock.
type GetLockOptions struct {
	Key   string // the lock's name, "locklab:Key" on the server; default "lock"
	Fence bool   // hand out a token from the lock's counter row
	// Check is how often a holder pings its connection to learn that it
	// broke (Lost); default 1 s. A hold shorter than that sends nothing.
	Check time.Duration
}

// HoldConns is the most connections a replica's db-getlock pool opens: one
// per holder or waiter, and one per KILL of a waiter that gave up. The
// default load (100 requests at once, shared by the replicas) fits one
// replica's; more wait in the pool for a connection. The servers started
// here allow MaxConnections, so two replicas at their limit, and the
// polling locks' pools beside them, fit.
const HoldConns = 150

// MaxConnections is the max_connections of the MariaDB servers the project
// starts (MariaDBArgs, deploy/mariadb.sh): MariaDB's default, 151, is
// fewer than two replicas' db-getlock waiters and the db lock's idle
// connections beside them (64 a replica, kept a minute).
const MaxConnections = 500

// OpenHolds is a pool for GetLock: as Open's, but with no read timeout (a
// waiter's GET_LOCK is silent until the lock comes, as long as its
// deadline; the contexts bound every call instead: the sale's acquire
// deadline, the release's timeout, each check's) and at most HoldConns
// connections. Parameters are interpolated by the driver (the lock's name
// and a number), so a statement is one round trip, not a prepare, an
// execute and a close.
func OpenHolds(dsn string) (*sql.DB, error) {
	db, err := open(dsn, func(c *mysql.Config) {
		c.ReadTimeout = 0
		c.InterpolateParams = true
	})
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(HoldConns)
	return db, nil
}

// NewGetLock returns the lock on db, a pool opened by OpenHolds.
func NewGetLock(db *sql.DB, opts GetLockOptions) *GetLock {
	if opts.Key == "" {
		opts.Key = "lock"
	}
	if opts.Check <= 0 {
		opts.Check = time.Second
	}
	return &GetLock{db: db, name: GetLockName(opts.Key), fence: opts.Fence, check: opts.Check}
}

// GetLockName is the server's name for key's lock: named locks are the
// whole server's, shared by every database on it, so the project's carry
// its prefix.
func GetLockName(key string) string { return "locklab:" + key }

// noDeadline is how long an acquisition whose context has no deadline
// waits in the server: a year, for ever in practice.
const noDeadline = 365 * 24 * time.Hour

// serverMargin is how much sooner than the context's deadline the server
// is told to stop waiting: it answers "not obtained" before the context
// ends, so the connection goes back to the pool instead of being killed.
const serverMargin = 20 * time.Millisecond

// Acquire waits in the server for the lock until ctx ends. owner is not
// sent: the connection is the owner (a nested acquisition is another
// connection, and waits on itself).
func (g *GetLock) Acquire(ctx context.Context, owner string) (lease.Lease, error) {
	timeout := noDeadline
	if deadline, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(deadline)-serverMargin, 0)
	}
	return g.acquire(ctx, timeout)
}

// TryAcquire makes one attempt: the lock, or lease.ErrTaken at once.
func (g *GetLock) TryAcquire(ctx context.Context, owner string) (lease.Lease, error) {
	return g.acquire(ctx, 0)
}

func (g *GetLock) acquire(ctx context.Context, timeout time.Duration) (lease.Lease, error) {
	conn, err := g.db.Conn(ctx)
	if err != nil {
		return nil, g.failed(ctx, "take a connection", err)
	}
	// Its id, to end a wait that this process gives up (KILL): asked
	// before waiting, so outside every hold.
	var id int64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		g.end(conn, 0) // nothing sent to wait on
		return nil, g.failed(ctx, "read its connection's id", err)
	}
	var got sql.NullInt64
	// lesson:begin db-getlock
	err = conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", g.name, timeout.Seconds()).Scan(&got)
	// lesson:end
	switch {
	case err != nil:
		// Given up (ctx), or the connection failed: the server may still
		// be waiting, or have just granted it. Ending the connection ends
		// both.
		g.end(conn, id)
		return nil, g.failed(ctx, "wait in GET_LOCK", err)
	case !got.Valid: // NULL: an error in the server (the wait killed)
		g.end(conn, id)
		return nil, g.failed(ctx, "wait in GET_LOCK", errors.New("GET_LOCK answered NULL"))
	case got.Int64 != 1: // 0: the timeout passed, another holds it
		_ = conn.Close() // holding nothing: back to the pool
		if timeout == 0 {
			return nil, lease.ErrTaken
		}
		return nil, g.waitedOut(ctx)
	}
	return g.held(ctx, conn, id)
}

// waitedOut is the error of a wait the server ended at the timeout it was
// given, serverMargin before ctx's deadline: the lock not obtained by the
// deadline (a sale's lock_timeout), once ctx has ended.
func (g *GetLock) waitedOut(ctx context.Context) error {
	t := time.NewTimer(serverMargin + 100*time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return g.failed(ctx, "wait in GET_LOCK", nil)
	case <-t.C: // a context with no deadline, waited a year
		return fmt.Errorf("db-getlock: %s: GET_LOCK timed out: %w", g.name, lease.ErrTaken)
	}
}

// held is the lease of the lock conn (id) obtained: its token bumped when
// fenced, its connection checked until the release.
func (g *GetLock) held(ctx context.Context, conn *sql.Conn, id int64) (lease.Lease, error) {
	var token int64
	if g.fence {
		var err error
		if token, err = g.token(ctx, conn); err != nil {
			g.end(conn, id) // frees the lock
			return nil, g.failed(ctx, "take a token", err)
		}
	}
	lost := make(chan struct{})
	stop := g.watch(conn, lost)
	release := func(ctx context.Context) error {
		stop()
		select {
		case <-lost:
			g.end(conn, id)
			return fmt.Errorf("db-getlock: release %s: its connection broke during the hold: %w", g.name, lease.ErrNotHeld)
		default:
		}
		var r sql.NullInt64
		// lesson:begin db-getlock
		err := conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", g.name).Scan(&r)
		// lesson:end
		switch {
		case err != nil:
			// Never back to the pool holding the lock: the server frees it
			// with the connection.
			g.end(conn, id)
			return fmt.Errorf("db-getlock: release %s: %w", g.name, err)
		case !r.Valid || r.Int64 != 1:
			// NULL: nobody holds it; 0: another connection does. Either
			// way this one had lost it.
			g.end(conn, id)
			return fmt.Errorf("db-getlock: release %s (RELEASE_LOCK answered %v): %w", g.name, r, lease.ErrNotHeld)
		}
		return conn.Close() // back to the pool, holding nothing
	}
	return lease.New(release, token, lost), nil
}

// token bumps the lock's counter row on conn, the holder's connection,
// making the table when it is missing.
func (g *GetLock) token(ctx context.Context, conn *sql.Conn) (int64, error) {
	res, err := conn.ExecContext(ctx, getLockTokenSQL, g.name)
	if noTable(err) {
		if _, err = conn.ExecContext(ctx, getLockSchema); err == nil {
			res, err = conn.ExecContext(ctx, getLockTokenSQL, g.name)
		}
	}
	if err != nil {
		return 0, err
	}
	token, err := res.LastInsertId()
	if err == nil && token <= 0 {
		err = fmt.Errorf("no token (%d)", token)
	}
	return token, err
}

// watch pings conn every check until stop is called; a ping that fails
// closes lost: the connection broke (killed, cut, or the ping gave up on a
// server that does not answer, and closed it), and with it the hold ended.
func (g *GetLock) watch(conn *sql.Conn, lost chan struct{}) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(g.check)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), g.check)
			err := conn.PingContext(ctx)
			cancel()
			if err != nil {
				close(lost)
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// end closes conn for good, never back to the pool, and, when it may be
// waiting in GET_LOCK or holding the lock (id not 0), kills it on the
// server from another connection, in the background: a closed socket ends
// an idle holder's connection at once, a wait only a second later.
func (g *GetLock) end(conn *sql.Conn, id int64) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // discarded, not pooled
	_ = conn.Close()
	if id == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = kill(ctx, g.db, id) // a server not answering: the wait ends at its timeout, the deadline
	}()
}

// kill ends the server's connection id, and with it its wait or its hold;
// one already gone is not an error.
func kill(ctx context.Context, db *sql.DB, id int64) error {
	_, err := db.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10))
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1094 { // ER_NO_SUCH_THREAD
		return nil
	}
	return err
}

// failed is an acquisition's error: the context's cause when it ended (a
// deadline: the sale answers lock_timeout), else the database's
// (unavailable).
func (g *GetLock) failed(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("lock not obtained (db-getlock: %s for %s): %w", what, g.name, context.Cause(ctx))
	}
	return fmt.Errorf("db-getlock: %s for %s: %w", what, g.name, err)
}
