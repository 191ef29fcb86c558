-- Abandon an acquisition whose reply was lost: delete the lock if, and only
-- if, it is the given owner's, whatever its shape: a string holding the owner
-- (v3 to v6) or a hash with the owner's field (v7, v8).
-- KEYS[1]: the lock key.
-- ARGV[1]: the owner.
-- Returns 1 when it deleted the lock, 0 when the lock was not the owner's.
local kind = redis.call('TYPE', KEYS[1]).ok
if (kind == 'string' and redis.call('GET', KEYS[1]) == ARGV[1])
  or (kind == 'hash' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1) then
  return redis.call('DEL', KEYS[1])
end
return 0
