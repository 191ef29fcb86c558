-- The lock table of seed 004's database lock: one row per lock name, never
-- deleted (a release empties it), so that its token only ever grows.
-- name: the lock's key; owner: its holder ('' when free); expires_at: when
-- the hold ends by itself (the database's clock, in UTC); token: the fencing token
-- of the latest acquisition.
CREATE TABLE IF NOT EXISTS locklab_locks (
  name       VARCHAR(191) NOT NULL PRIMARY KEY,
  owner      VARCHAR(191) NOT NULL,
  expires_at DATETIME(6)  NOT NULL,
  token      BIGINT       NOT NULL
) ENGINE=InnoDB
