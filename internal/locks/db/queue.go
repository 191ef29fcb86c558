package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/locklab/locklab/internal/api"
)

// Querier is the part of a *sql.DB the readers below use.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// RowQueue reads db's lock row for the lab's store panel: its owner, and
// the time left of its hold on the database's clock. A row with no owner
// was released; one whose hold has passed holds nothing (the next
// attempt takes it over): an entry that does not hold. Pollers wait in no
// queue: they are not in the store between their attempts.
func RowQueue(ctx context.Context, db Querier, key string) ([]api.QueueEntry, error) {
	return readRow(ctx, db, "locklab_locks", key, false)
}

// SeedQueue reads db-seed's row the same way. The seed never reads its
// expiry: a row there holds the lock, its hold passed or not.
func SeedQueue(ctx context.Context, db Querier, key string) ([]api.QueueEntry, error) {
	return readRow(ctx, db, "locklab_seed_locks", key, true)
}

func readRow(ctx context.Context, db Querier, table, key string, expiryIgnored bool) ([]api.QueueEntry, error) {
	var owner string
	var left int64
	err := db.QueryRowContext(ctx, "SELECT owner, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) FROM "+table+" WHERE name = ?", key).Scan(&owner, &left)
	switch {
	case errors.Is(err, sql.ErrNoRows), noTable(err): // never taken, or given back (db-seed)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("db: read %s's row %q: %w", table, key, err)
	case owner == "": // released (db)
		return nil, nil
	}
	ms := max(left/1000, 0)
	return []api.QueueEntry{{Key: table + "/" + key, Owner: owner, Holds: expiryIgnored || left > 0, PTTLms: &ms}}, nil
}

// GetLockQueue reads db-getlock's named lock for the lab's store panel: the
// connection that holds it (IS_USED_LOCK), then the connections waiting in
// GET_LOCK for it, longest waiting first (MariaDB grants in its own order:
// this is the likeliest). A waiter is found in the server's process list by
// its statement, as GetLock sends it (its parameters in place: OpenHolds).
func GetLockQueue(ctx context.Context, db Querier, key string) ([]api.QueueEntry, error) {
	name := GetLockName(key)
	var holder sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", name).Scan(&holder); err != nil {
		return nil, fmt.Errorf("db-getlock: who holds %s: %w", name, err)
	}
	var out []api.QueueEntry
	if holder.Valid {
		id := strconv.FormatInt(holder.Int64, 10)
		out = append(out, api.QueueEntry{Key: "connection " + id, Conn: id, Holds: true})
	}
	rows, err := db.QueryContext(ctx, "SELECT ID, TIME_MS FROM information_schema.PROCESSLIST"+
		" WHERE STATE = 'User lock' AND LOCATE(CONCAT('GET_LOCK(', QUOTE(?), ','), INFO) > 0 ORDER BY TIME_MS DESC, ID", name)
	if err != nil {
		return nil, fmt.Errorf("db-getlock: who waits for %s: %w", name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var waited float64
		if err := rows.Scan(&id, &waited); err != nil {
			return nil, fmt.Errorf("db-getlock: who waits for %s: %w", name, err)
		}
		if holder.Valid && id == holder.Int64 { // granted since IS_USED_LOCK, not yet out of its state
			continue
		}
		s := strconv.FormatInt(id, 10)
		out = append(out, api.QueueEntry{Key: "connection " + s, Conn: s, WaitedMs: int64(waited)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("db-getlock: who waits for %s: %w", name, err)
	}
	return out, nil
}
