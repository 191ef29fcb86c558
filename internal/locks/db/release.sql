-- The owner-checked release: the row stays, free (its token kept for the
-- next holder's + 1). Arguments: name, owner. Rows affected: 1 released, 0
-- not held by owner (expired and taken over, or never taken).
UPDATE locklab_locks SET owner = '', expires_at = '1970-01-01 00:00:01'
WHERE name = ? AND owner = ?
