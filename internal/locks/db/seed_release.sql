-- The seed's Unlock: an owner-checked DELETE. Arguments: name, owner. Rows
-- affected: 1 released, 0 not held by owner.
-- lesson:begin db-seed
DELETE FROM locklab_seed_locks WHERE name = ? AND owner = ?
-- lesson:end
