-- The owner-checked release of a hold still running: the row stays, free
-- (its token kept for the next holder's + 1). Arguments: name, owner. Rows
-- affected: 1 released, 0 not held by owner: taken over, never taken, or
-- expired and not taken over yet. That last one is a lease lost as much as
-- the first (another could have taken it at any moment), so it is not a
-- release; its row, expired, is free to the next taker as it is.
-- lesson:begin db
UPDATE locklab_locks SET owner = '', expires_at = '1970-01-01 00:00:01'
WHERE name = ? AND owner = ? AND expires_at >= UTC_TIMESTAMP(6)
-- lesson:end
