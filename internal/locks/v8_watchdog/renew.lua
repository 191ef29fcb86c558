-- Watchdog renewal: extend the lease only while the owner still holds the lock.
-- KEYS[1]: the lock key (v7's hash).
-- ARGV[1]: the owner.
-- ARGV[2]: the lease in milliseconds.
-- Returns 1 when renewed, 0 when the owner no longer holds the lock.
-- lesson:begin v8
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
-- lesson:end
