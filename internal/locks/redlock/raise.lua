-- Raise a node's fencing counter to a token handed out, never lower it: the
-- write-back that keeps Redlock's tokens rising when the nodes' counters
-- differ (a node that was down missed the INCRs of the holders before).
-- Compare and set in one step, so a concurrent INCR is never undone.
-- KEYS[1]: the fencing counter.
-- ARGV[1]: the token handed out (an integer >= 1).
-- Returns the counter afterwards (>= ARGV[1]).
local token = tonumber(ARGV[1])
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n < token then
  redis.call('SET', KEYS[1], ARGV[1])
  return token
end
return n
