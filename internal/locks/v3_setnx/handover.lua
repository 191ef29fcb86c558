-- Release the string lock (v3 to v6) by handing it to the first waiter still
-- queued (-wait handoff), or free it when none waits. Follows the hand-off
-- queue functions (package handoff, queue.lua).
-- KEYS[1]: the lock key. KEYS[2]: the fencing counter (used only when the
-- next holder queued fenced). KEYS[3]: the queue. KEYS[4]: the deadlines.
-- KEYS[5]: the grant marker.
-- ARGV[1]: the owner releasing.
-- ARGV[2]: 1 to check in this step that the owner still holds the lock (v6);
--          0 hands over whatever holds it, as v3 to v5's DEL deletes it.
-- ARGV[3]: how long the next holder has to claim the lock, in ms (claim.lua
--          then sets its lease: v3's none too).
-- The next holder is told on the channel it queued with, and gets a fencing
-- token, issued in this same step, when it queued fenced: its own wish, not
-- the releaser's (with -chaos a fenced and an unfenced sale share the lock).
-- Returns the owner the lock was handed to, 1 when it was freed (none waits),
-- 0 when it was not held: gone, or (checked) another owner's.
if ARGV[2] == '1' then
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
  end
elseif redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
return handoff_pass('string', ARGV[3]) or 1
