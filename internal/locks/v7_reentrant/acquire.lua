-- Reentrant acquire: the lock is a hash whose one field is the owner and whose
-- value counts that owner's nested holds.
-- KEYS[1]: the lock key.
-- ARGV[1]: the owner (uuid:goroutine-id).
-- ARGV[2]: the lease in milliseconds (PEXPIRE: the tutorial passed a Go
--          time.Duration to EXPIRE, which go-redis sends as nanoseconds, so its
--          20 s lease became 20,000,000,000 s).
-- Returns 1 when ARGV[1] now holds the lock (first or nested hold), 0 when
-- another owner holds it.
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
