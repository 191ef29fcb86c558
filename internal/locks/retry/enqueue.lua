-- Join a lock's wait queue (-wait notify) and say whether this waiter is first.
-- KEYS[1]: the queue, a sorted set: member = owner, score = the owner's wait
--          deadline in ms on Redis's clock. Waiters with the same deadline
--          length are in arrival order, and the entry of a waiter that died
--          is dropped once its deadline has passed.
-- ARGV[1]: the owner.
-- ARGV[2]: how long the owner will wait, in ms.
-- Returns 1 when ARGV[1] is first in the queue, 0 otherwise. An owner already
-- queued keeps its place.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], 'NX', now + tonumber(ARGV[2]), ARGV[1])
if redis.call('ZRANGE', KEYS[1], 0, 0)[1] == ARGV[1] then
  return 1
end
return 0
