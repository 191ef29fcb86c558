-- db-getlock's fencing tokens: one row per lock name, whose token its
-- holder bumps inside its hold (GET_LOCK's lock has no number of its own).
-- Never deleted, so that a token only ever grows.
CREATE TABLE IF NOT EXISTS locklab_getlock_tokens (
  name  VARCHAR(191) NOT NULL PRIMARY KEY,
  token BIGINT       NOT NULL
) ENGINE=InnoDB
