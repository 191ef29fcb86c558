-- Compare-and-delete: release the lock only if this owner still holds it.
-- KEYS[1]: the lock key.
-- ARGV[1]: the owner's value, as written by SET NX.
-- Returns 1 when the lock was deleted, 0 when it was gone or held by another owner.
-- (The tutorial writes get(KEYS[1] == ARGV[1]), which errors on every call; this is the intended script.)
-- lesson:begin v6
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
-- lesson:end
