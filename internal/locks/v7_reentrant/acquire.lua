-- Reentrant acquire: the lock is a hash whose one field is the owner and whose
-- value counts that owner's nested holds.
-- KEYS[1]: the lock key.
-- KEYS[2]: the fencing counter (used only when ARGV[3] is 1).
-- ARGV[1]: the owner (uuid:goroutine-id).
-- ARGV[2]: the lease in milliseconds (PEXPIRE: the tutorial passed a Go
--          time.Duration to EXPIRE, which go-redis sends as nanoseconds, so its
--          20 s lease became 20,000,000,000 s).
-- ARGV[3]: 1 to hand out a fencing token: a new one (INCR) on the owner's
--          first hold, the current one on a nested hold.
-- Returns 0 when another owner holds the lock; otherwise 1, or with ARGV[3]
-- the token (>= 1).
-- lesson:begin v7 v8
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  local holds = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if ARGV[3] ~= '1' then
    return 1
  end
  local current = redis.call('GET', KEYS[2])
  if holds > 1 and current then
    return tonumber(current)
  end
  return redis.call('INCR', KEYS[2])
end
return 0
-- lesson:end
