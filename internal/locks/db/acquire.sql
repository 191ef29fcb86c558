-- One attempt, in one statement: insert the row (the lock was never taken),
-- or take it over when its hold has expired or was released, or leave it.
-- Arguments: name, owner, the hold in microseconds.
-- Rows affected: 1 inserted, 2 taken over (both: owner holds the lock), 0
-- held by another. LAST_INSERT_ID() is the new token: 1 on insert, the
-- row's token + 1 on takeover. MariaDB assigns left to right and a later
-- assignment sees the earlier ones, so expires_at, which the conditions
-- read, is assigned last.
INSERT INTO locklab_locks (name, owner, expires_at, token)
VALUES (?, ?, NOW(6) + INTERVAL ? MICROSECOND, LAST_INSERT_ID(1))
ON DUPLICATE KEY UPDATE
  token      = IF(expires_at < NOW(6), LAST_INSERT_ID(token + 1), token),
  owner      = IF(expires_at < NOW(6), VALUES(owner), owner),
  expires_at = IF(expires_at < NOW(6), VALUES(expires_at), expires_at)
