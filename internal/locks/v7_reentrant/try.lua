-- One attempt at the reentrant lock (v7, v8) for -wait handoff: acquire.lua,
-- run as the function v7_acquire, or else join the queue in the same step.
-- Follows the hand-off queue functions (package handoff, queue.lua).
-- KEYS[1]: the lock key (a hash). KEYS[2]: the fencing counter.
-- KEYS[3]: the queue. KEYS[4]: the deadlines. KEYS[5]: the grant marker.
-- ARGV[1] to ARGV[3]: acquire.lua's (the owner, the lease in ms, 1 to fence).
--          The fence wish is queued with the owner, so that the release that
--          hands it the lock issues its token (whatever the releaser's).
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
-- when it is queued. An owner that holds the lock takes a nested hold at
-- once (acquire.lua), never queued behind its own waiters.
local owner = ARGV[1]
if ARGV[5] == '1' and redis.call('HEXISTS', KEYS[1], owner) == 1 and not redis.call('ZSCORE', KEYS[3], owner) then
  handoff_settle(KEYS[5], owner)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if ARGV[3] == '1' then
    return redis.call('INCR', KEYS[2])
  end
  return 1
end
local held = v7_acquire()
if held ~= 0 then
  handoff_settle(KEYS[5], owner)
  if ARGV[5] == '1' then
    handoff_dequeue(KEYS[3], KEYS[4], owner)
  end
  return held
end
handoff_enqueue(KEYS[3], KEYS[4], owner, tonumber(ARGV[4]), ARGV[6], ARGV[3])
return 0
