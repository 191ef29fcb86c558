package db

import (
	"context"
	"database/sql"
	"strconv"
)

// GetLockHolder is who holds db-getlock's lock on key now, as the server
// says (the lab's lessons show it between two stepped sales): the id of
// the connection holding it (IS_USED_LOCK). ok is false when nobody holds
// it. The lock has no lease: it goes with its connection, or its release.
func GetLockHolder(ctx context.Context, db *sql.DB, key string) (conn string, ok bool, err error) {
	var id sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", GetLockName(key)).Scan(&id); err != nil {
		return "", false, err
	}
	if !id.Valid {
		return "", false, nil
	}
	return strconv.FormatInt(id.Int64, 10), true, nil
}
