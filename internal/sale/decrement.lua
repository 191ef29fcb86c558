-- The lock-free sale: check and decrement in one atomic step.
-- KEYS[1]: the stock key.
-- Returns the stock left after the sale (an integer below 2^53, else as a
-- string: Lua's numbers are doubles, exact only up to 2^53, and a stock may
-- be any int64), -1 when sold out, -2 when the key is
-- missing, -3 when its value is not a stock: anything but the canonical
-- decimal form of a 64-bit integer, exactly what Redis's DECR and the Go side
-- (sale.ParseStock) accept. Lua's tonumber is not used: it takes " 5", "1e3"
-- and "0x10", and it reads numbers as doubles.
-- lesson:begin atomic
local v = redis.call('GET', KEYS[1])
if not v then
  return -2
end
local digits = v:match('^%-?([1-9]%d*)$')
if v == '0' then
  return -1
end
if not digits or #digits > 19 then
  return -3
end
if #digits == 19 then
  local limit = '9223372036854775807'
  if v:sub(1, 1) == '-' then
    limit = '9223372036854775808'
  end
  if digits > limit then
    return -3
  end
end
if v:sub(1, 1) == '-' then
  return -1
end
-- DECR's reply reaches Lua as a double: exact below 2^53 in size, where it
-- is returned as it is (one command fewer per sale); beyond, the value is
-- read back as a string.
local n = redis.call('DECR', KEYS[1])
if n < 9007199254740992 then
  return n
end
return redis.call('GET', KEYS[1])
-- lesson:end
