-- The lock-free sale: check and decrement in one atomic step.
-- KEYS[1]: the stock key.
-- Returns the stock left after the sale, -1 when sold out, -2 when the key is
-- missing. A value that is not an integer is an error (DECR refuses it).
local v = redis.call('GET', KEYS[1])
if not v then
  return -2
end
if tonumber(v) ~= nil and tonumber(v) <= 0 then
  return -1
end
return redis.call('DECR', KEYS[1])
