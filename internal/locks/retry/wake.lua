-- Leave a lock's wait queue and, if the lock is free, wake the waiter that is
-- now first (-wait notify). Follows dead.lua.
-- KEYS[1]: the queue (see enqueue.lua). KEYS[2]: the lock key.
-- KEYS[3]: the woken waiters (see enqueue.lua).
-- KEYS[4]: the passes counter (PassedKey): incremented by each dead woken
--          waiter dropped here, by the releasing side (its release, or its
--          check at the claim deadline), never by a waiter's own periodic
--          check (enqueue.lua): a run can see who passed the lock on.
-- ARGV[1]: the owner leaving: it released the lock, or gave up waiting; ''
--          for none (the check at a woken waiter's claim deadline).
-- ARGV[2]: the channel to PUBLISH on; the message is the owner to wake.
-- ARGV[3]: how long the woken waiter has to take the lock, in ms.
-- ARGV[4]: '1' to wake; '0' only leaves (a release switched off by make
--          mutations, off=wake: the waiters find the free lock at their own
--          periodic check).
-- Returns the owner woken, or already woken and still within its claim
-- deadline (the caller checks again then); false when the lock is held or
-- none waits.
if ARGV[1] ~= '' then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[3], ARGV[1])
end
if ARGV[4] ~= '1' or redis.call('EXISTS', KEYS[2]) == 1 then
  return false
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local dropped = notify_drop_dead(KEYS[1], KEYS[2], KEYS[3], now)
if dropped > 0 then
  redis.call('INCRBY', KEYS[4], dropped)
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
if not first then
  return false
end
if not redis.call('HGET', KEYS[3], first) then
  redis.call('HSET', KEYS[3], first, string.format('%d', now + tonumber(ARGV[3])))
  redis.call('PUBLISH', ARGV[2], first)
end
return first
