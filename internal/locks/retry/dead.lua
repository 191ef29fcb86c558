-- The -wait notify queue's clean-up, put in front of enqueue.lua and wake.lua.
-- Drop the entries whose wait deadline has passed; then, while the lock is
-- free, drop the first waiter if it was woken and its claim deadline passed
-- without it taking the lock: it died (its replica killed) or went away.
-- queue, lock, woken: KEYS 1 to 3 of those scripts; now: Redis's clock in ms.
-- Returns how many woken waiters it dropped as dead (not those whose wait
-- deadline passed).
local function notify_drop_dead(queue, lock, woken, now)
  for _, gone in ipairs(redis.call('ZRANGEBYSCORE', queue, '-inf', now)) do
    redis.call('HDEL', woken, gone)
  end
  redis.call('ZREMRANGEBYSCORE', queue, '-inf', now)
  local dropped = 0
  if redis.call('EXISTS', lock) == 1 then
    return dropped
  end
  while true do
    local first = redis.call('ZRANGE', queue, 0, 0)[1]
    if not first then
      return dropped
    end
    local by = redis.call('HGET', woken, first)
    if not by or tonumber(by) > now then
      return dropped
    end
    redis.call('ZREM', queue, first)
    redis.call('HDEL', woken, first)
    dropped = dropped + 1
  end
end
