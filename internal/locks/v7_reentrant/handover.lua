-- Reentrant release for -wait handoff: release.lua, run as the function
-- v7_release, and when it freed the lock, hand the lock to the first waiter
-- still queued (one hold, a fresh lease, a fencing token when fenced). Follows
-- the hand-off queue functions (package handoff, queue.lua).
-- KEYS[1]: the lock key (a hash). KEYS[2]: the fencing counter (used only
-- when ARGV[3] is 1). KEYS[3]: the queue. KEYS[4]: the deadlines. KEYS[5]:
-- the grant marker.
-- ARGV[1]: the owner releasing (release.lua's).
-- ARGV[2]: how long the next holder has to claim the lock, in ms (claim.lua
--          then sets its lease).
-- ARGV[3]: 1 to issue the next holder a fencing token, in this same step.
-- The next holder is told on the channel it queued with.
-- Returns release.lua's reply: -1 when ARGV[1] holds nothing (the lease
-- expired), 0 when it still has nested holds, 1 when the lock was freed; or
-- the owner it was handed to.
local released = v7_release()
if released ~= 1 then
  return released
end
return handoff_pass('hash', ARGV[2], ARGV[3]) or 1
