-- One attempt, in one statement: insert the row (the lock was never taken),
-- or take it over when its hold has expired or was released, or leave it.
-- Arguments: name, owner, the hold in microseconds.
-- Rows affected: 1 inserted, 2 taken over (both: owner holds the lock), 0
-- held by another (the row left as it was; with the client flag
-- CLIENT_FOUND_ROWS that would be 1, the row found, so Open forces it off).
-- LAST_INSERT_ID() is the new token: 1 on insert, the row's token + 1 on
-- takeover. MariaDB assigns left to right and a later assignment sees the
-- earlier ones, so expires_at, which the conditions read, is assigned last.
-- Every time is UTC (UTC_TIMESTAMP, not NOW, which is in the session's
-- zone): sessions in two zones compare one clock, and a daylight-saving
-- change neither expires every hold at once nor keeps a dead holder's an
-- hour longer.
-- lesson:begin db
INSERT INTO locklab_locks (name, owner, expires_at, token)
VALUES (?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, LAST_INSERT_ID(1))
ON DUPLICATE KEY UPDATE
  token      = IF(expires_at < UTC_TIMESTAMP(6), LAST_INSERT_ID(token + 1), token),
  owner      = IF(expires_at < UTC_TIMESTAMP(6), VALUES(owner), owner),
  expires_at = IF(expires_at < UTC_TIMESTAMP(6), VALUES(expires_at), expires_at)
-- lesson:end
