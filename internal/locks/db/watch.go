package db

import (
	"context"
	"database/sql"
)

// What the scenarios need to watch and reset the database locks from
// outside, as they watch a Redis lock's key: here, beside the tables they
// read, so that nobody else writes this SQL. A table not made yet (no
// attempt so far) holds nothing.

// Held reports whether key's lock is held in the lock table: a holder
// whose hold has not expired.
func Held(ctx context.Context, db *sql.DB, key string) (bool, error) {
	return count(ctx, db, "SELECT COUNT(*) FROM locklab_locks WHERE name = ? AND owner <> '' AND expires_at >= UTC_TIMESTAMP(6)", key)
}

// Clear frees key's lock in the lock table, its token kept.
func Clear(ctx context.Context, db *sql.DB, key string) error {
	return exec(ctx, db, "UPDATE locklab_locks SET owner = '', expires_at = '1970-01-01 00:00:01' WHERE name = ?", key)
}

// SeedHeld reports whether key's row is in the seed's table: expired or
// not, the row is the lock.
func SeedHeld(ctx context.Context, db *sql.DB, key string) (bool, error) {
	return count(ctx, db, "SELECT COUNT(*) FROM locklab_seed_locks WHERE name = ?", key)
}

// SeedClear deletes key's row from the seed's table: the cleanup the seed
// leaves to someone.
func SeedClear(ctx context.Context, db *sql.DB, key string) error {
	return exec(ctx, db, "DELETE FROM locklab_seed_locks WHERE name = ?", key)
}

// GetLockHeld reports whether key's named lock (db-getlock) is held on the
// server.
func GetLockHeld(ctx context.Context, db *sql.DB, key string) (bool, error) {
	id, err := getLockHolder(ctx, db, key)
	return id != 0, err
}

// GetLockClear frees key's named lock by killing the connection that holds
// it: only its own connection can release it.
func GetLockClear(ctx context.Context, db *sql.DB, key string) error {
	id, err := getLockHolder(ctx, db, key)
	if err != nil || id == 0 {
		return err
	}
	return kill(ctx, db, id)
}

// getLockHolder is the id of the connection holding key's named lock, 0
// when nobody holds it.
func getLockHolder(ctx context.Context, db *sql.DB, key string) (int64, error) {
	var id sql.NullInt64
	err := db.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", GetLockName(key)).Scan(&id)
	return id.Int64, err
}

func count(ctx context.Context, db *sql.DB, query, key string) (bool, error) {
	var n int
	err := db.QueryRowContext(ctx, query, key).Scan(&n)
	if noTable(err) {
		return false, nil
	}
	return n > 0, err
}

func exec(ctx context.Context, db *sql.DB, stmt, key string) error {
	if _, err := db.ExecContext(ctx, stmt, key); err != nil && !noTable(err) {
		return err
	}
	return nil
}
