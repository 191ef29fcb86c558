-- Claim a grant (-wait handoff): the waiter a release handed the lock to says
-- it is alive, and its lease starts now. Follows the hand-off queue functions
-- (queue.lua).
-- KEYS[1]: the lock key, a string (v3 to v6) or a hash (v7, v8).
-- KEYS[2]: the grant marker (queue.lua's granted).
-- ARGV[1]: the owner claiming.
-- ARGV[2]: its lease in ms; 0 means no expiry (v3).
-- Returns 1 when the lock is the owner's, now with its whole lease; 0 when the
-- grant was taken back first: not claimed in time, it expired or was passed
-- on (reclaim.lua), and the owner holds nothing.
local kind = redis.call('TYPE', KEYS[1]).ok
if not ((kind == 'string' and redis.call('GET', KEYS[1]) == ARGV[1])
    or (kind == 'hash' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1)) then
  return 0
end
handoff_settle(KEYS[2], ARGV[1])
if tonumber(ARGV[2]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
  redis.call('PERSIST', KEYS[1])
end
return 1
