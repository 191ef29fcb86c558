-- Reentrant release for -wait handoff: release.lua, run as the function
-- v7_release, and when it freed the lock, hand the lock to the first waiter
-- still queued (one hold, a fresh lease, a fencing token when it queued
-- fenced). Follows the hand-off queue functions (package handoff, queue.lua).
-- KEYS[1]: the lock key (a hash). KEYS[2]: the fencing counter (used only
-- when the next holder queued fenced). KEYS[3]: the queue. KEYS[4]: the
-- deadlines. KEYS[5]: the grant marker.
-- ARGV[1]: the owner releasing (release.lua's).
-- ARGV[2]: how long the next holder has to claim the lock, in ms (claim.lua
--          then sets its lease).
-- The next holder is told on the channel it queued with, and gets a fencing
-- token, issued in this same step, when it queued fenced: its own wish, not
-- the releaser's (with -chaos a fenced and an unfenced sale share the lock).
-- Returns release.lua's reply: -1 when ARGV[1] holds nothing (the lease
-- expired), 0 when it still has nested holds, 1 when the lock was freed; or
-- the owner it was handed to.
local released = v7_release()
if released ~= 1 then
  return released
end
return handoff_pass('hash', ARGV[2]) or 1
