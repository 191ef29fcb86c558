-- A fenced SET NX: take the lock and, in the same atomic step, hand out the
-- next fencing token. Issuing the token in the grant's own step is what makes
-- tokens follow the order in which the lock was held.
-- KEYS[1]: the lock key.
-- KEYS[2]: the fencing counter (on the lock's node).
-- ARGV[1]: the owner's value.
-- ARGV[2]: the lease in milliseconds; 0 means no expiry (v3).
-- Returns the new token (>= 1) when the lock was taken, 0 when another owner holds it.
local ok
if tonumber(ARGV[2]) > 0 then
  ok = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
else
  ok = redis.call('SET', KEYS[1], ARGV[1], 'NX')
end
if not ok then
  return 0
end
return redis.call('INCR', KEYS[2])
