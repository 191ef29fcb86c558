-- Join a lock's wait queue (-wait notify) and say whether this waiter is first.
-- KEYS[1]: the queue, a sorted set: member = owner, score = the owner's wait
--          deadline in ms on Redis's clock. Waiters with the same deadline
--          length are in arrival order, and the entry of a waiter that died
--          is dropped once its deadline has passed.
-- KEYS[2]: the lock key.
-- KEYS[3]: the woken waiters: a hash, owner -> the ms (Redis's clock) by
--          which it must have taken the lock it was woken for (wake.lua).
-- ARGV[1]: the owner.
-- ARGV[2]: how long the owner will wait, in ms.
-- Returns 1 when ARGV[1] is first in the queue, 0 otherwise. An owner already
-- queued keeps its place. A first waiter that was woken, did not take the
-- free lock by its claim deadline and is still first is dead (or gone): it
-- is dropped, so the waiters behind it do not wait for its own deadline.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
notify_drop_dead(KEYS[1], KEYS[2], KEYS[3], now)
redis.call('ZADD', KEYS[1], 'NX', now + tonumber(ARGV[2]), ARGV[1])
if redis.call('ZRANGE', KEYS[1], 0, 0)[1] == ARGV[1] then
  return 1
end
return 0
