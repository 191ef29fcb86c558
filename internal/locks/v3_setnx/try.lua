-- One attempt at the string lock (v3 to v6) for -wait handoff: take it if it
-- is free, or else join the queue in the same step. Follows the hand-off
-- queue functions (package handoff, queue.lua).
-- KEYS[1]: the lock key. KEYS[2]: the fencing counter (used only when ARGV[3]
-- is 1). KEYS[3]: the queue. KEYS[4]: the deadlines. KEYS[5]: the grant
-- marker.
-- ARGV[1]: the owner.
-- ARGV[2]: the lease in ms; 0 means no expiry (v3).
-- ARGV[3]: 1 to hand out a fencing token: now, or queued with the owner, so
--          that the release that hands it the lock issues its token (the
--          owner's wish, whatever the releaser's).
-- ARGV[4]: how long the owner waits, in ms, if it must.
-- ARGV[5]: 1 when the owner is already queued: a release may have handed it
--          the lock (it is then no longer queued), and its message been lost;
--          the owner then claims it here (its lease starts now) and, fenced,
--          gets a new token (the grant's was in the message it never read),
--          issued now that it holds the lock, so newer than every one
--          before; reading the counter instead answered nil (a script error)
--          on a lock that had never issued one.
-- ARGV[6]: the channel to tell the owner on when a release hands it the lock.
-- Returns the token (1 when unfenced) when the owner holds the lock now, 0
-- when it is queued. A free lock is taken even if others are queued: it is
-- free with waiters only after a lease ran out, and they take it at their
-- next check in the same way.
local owner = ARGV[1]
local fenced = ARGV[3] == '1'
if ARGV[5] == '1' and redis.call('GET', KEYS[1]) == owner and not redis.call('ZSCORE', KEYS[3], owner) then
  handoff_settle(KEYS[5], owner)
  if tonumber(ARGV[2]) > 0 then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  else
    redis.call('PERSIST', KEYS[1])
  end
  if fenced then
    return redis.call('INCR', KEYS[2])
  end
  return 1
end
local ok
if tonumber(ARGV[2]) > 0 then
  ok = redis.call('SET', KEYS[1], owner, 'NX', 'PX', ARGV[2])
else
  ok = redis.call('SET', KEYS[1], owner, 'NX')
end
if ok then
  handoff_settle(KEYS[5], owner)
  if ARGV[5] == '1' then
    handoff_dequeue(KEYS[3], KEYS[4], owner)
  end
  if fenced then
    return redis.call('INCR', KEYS[2])
  end
  return 1
end
handoff_enqueue(KEYS[3], KEYS[4], owner, tonumber(ARGV[4]), ARGV[6], ARGV[3])
return 0
