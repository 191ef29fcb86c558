-- Reentrant release: drop one of the owner's holds; free the lock at zero.
-- KEYS[1]: the lock key.
-- ARGV[1]: the owner.
-- Returns -1 when ARGV[1] holds nothing (the lease expired), 1 when this
-- release freed the lock, 0 when the owner still has nested holds.
-- lesson:begin v7 v8
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return -1
end
if redis.call('HINCRBY', KEYS[1], ARGV[1], -1) > 0 then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
-- lesson:end
