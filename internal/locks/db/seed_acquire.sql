-- The seed's TryLock: one INSERT. Arguments: name, owner, the hold in
-- microseconds (written, never read; in UTC, as db's). A duplicate key
-- (1062) means taken.
-- lesson:begin db-seed
INSERT INTO locklab_seed_locks (name, owner, expires_at) VALUES (?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
-- lesson:end
