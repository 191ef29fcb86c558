-- Leave the hand-off queue: a waiter that gives up (its deadline, its client
-- gone, an attempt that failed).
-- KEYS[1]: the lock key, a string (v3 to v6) or a hash (v7, v8).
-- KEYS[2]: the queue. KEYS[3]: the deadlines (see queue.lua).
-- ARGV[1]: the owner leaving.
-- Returns 1 when the owner was not queued but holds the lock: a release handed
-- it over while it was leaving (or a lost reply hid that it took it), and the
-- caller must pass it on; 0 otherwise.
if handoff_dequeue(KEYS[2], KEYS[3], ARGV[1]) then
  return 0
end
local kind = redis.call('TYPE', KEYS[1]).ok
if (kind == 'string' and redis.call('GET', KEYS[1]) == ARGV[1])
  or (kind == 'hash' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1) then
  return 1
end
return 0
