-- The next fencing token of a lock, taken by its holder inside its hold, on
-- the connection that holds it. Argument: name. LAST_INSERT_ID() is the new
-- token: 1 on insert, the row's token + 1 after. It commits (autocommit)
-- before the holder reads it, so a successor, who can only obtain the lock
-- once this connection is gone, bumps a larger one.
INSERT INTO locklab_getlock_tokens (name, token) VALUES (?, LAST_INSERT_ID(1))
ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1)
