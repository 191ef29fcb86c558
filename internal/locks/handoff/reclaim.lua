-- The check after a grant's claim deadline: when the waiter a release handed
-- the lock to has not claimed it in time (its replica died, its client went
-- away, or it was too slow), take the grant back and hand the lock to the
-- next waiter still queued, or free it. Follows the hand-off queue functions
-- (queue.lua).
-- KEYS[1]: the lock key. KEYS[2]: the fencing counter (used only when the
-- next owner queued fenced). KEYS[3]: the queue. KEYS[4]: the deadlines.
-- KEYS[5]: the grant marker. KEYS[6]: the passes counter (Keys.Passed):
-- incremented each time this check takes a grant back, so that a run can see
-- who passed the lock on (this check, not the waiters' own periodic one).
-- ARGV[1]: the lock's kind: 'string' (v3 to v6) or 'hash' (v7, v8).
-- ARGV[2]: how long the next owner has to claim it, in ms.
-- The next owner gets a fencing token, in this same step, when it queued
-- fenced.
-- Returns the ms until the grant in flight is due to be checked again (its
-- claim deadline, or the new grant's), or 0 when none is in flight: claimed,
-- another owner holds the lock, or none waits (the lock is then freed).
local deadline, grantee = handoff_granted(KEYS[5])
if not deadline then
  return 0
end
local now = handoff_now()
if deadline > now then
  return deadline - now
end
redis.call('DEL', KEYS[5])
local kind = redis.call('TYPE', KEYS[1]).ok
if not (kind == 'none'
    or (kind == 'string' and redis.call('GET', KEYS[1]) == grantee)
    or (kind == 'hash' and redis.call('HEXISTS', KEYS[1], grantee) == 1)) then
  return 0
end
redis.call('INCR', KEYS[6])
if handoff_pass(ARGV[1], ARGV[2]) then
  return tonumber(ARGV[2])
end
return 0
