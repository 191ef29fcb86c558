-- Removes the lock a crashed stepped sale left (the lab's lessons): only
-- if it is still that sale's, never another owner's.
-- KEYS[1]: the lock key.
-- ARGV[1]: the crashed sale's owner (uuid:goroutine-id).
-- A string lock (v3-v6) is the owner's when it holds ARGV[1]; a hash lock
-- (v7, v8: one field, the owner, counting its holds) when ARGV[1] is its
-- field. Returns 1 when the key was deleted, 0 when it was gone or
-- another owner's (left as it is).
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'string' and redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
if kind == 'hash' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return redis.call('DEL', KEYS[1])
end
return 0
