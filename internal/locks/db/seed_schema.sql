-- The seed's own lock table (seed 004), for the db-seed version: a row is
-- the lock, inserted to take it and deleted to give it back. Its expiry is
-- written and never read: the seed leaves expired rows to "periodic
-- cleanup", which nothing here does. Apart from db's table: db's rows are
-- never deleted, so that their tokens only grow.
CREATE TABLE IF NOT EXISTS locklab_seed_locks (
  name       VARCHAR(191) NOT NULL PRIMARY KEY,
  owner      VARCHAR(191) NOT NULL,
  expires_at DATETIME(6)  NOT NULL
) ENGINE=InnoDB
