-- Leave a lock's wait queue and, if the lock is free, wake the waiter that is
-- now first (-wait notify).
-- KEYS[1]: the queue (see enqueue.lua).
-- KEYS[2]: the lock key.
-- ARGV[1]: the owner leaving: it released the lock, or gave up waiting.
-- ARGV[2]: the channel to PUBLISH on; the message is the owner to wake.
-- Returns 1 when a waiter was woken, 0 when the lock is held or none waits.
redis.call('ZREM', KEYS[1], ARGV[1])
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local first = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
if first then
  redis.call('PUBLISH', ARGV[2], first)
  return 1
end
return 0
