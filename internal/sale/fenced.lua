-- The storage's side of fencing, on every access (Kleppmann): a fenced read
-- or write of the stock passes only for the newest holder that has touched
-- it, and registers it, so a stale holder is refused whichever it does first.
-- KEYS[1]: the stock key.
-- KEYS[2]: the newest holder that has read or written the stock, for one
--          token domain (one counter): a hash {token, owner}. Tokens of two
--          domains are never compared.
-- ARGV[1]: the holder's token.
-- ARGV[2]: the holder's owner: an equal token from another owner is refused
--          (redlock's tokens can repeat).
-- ARGV[3]: the new stock for a write; empty for a read.
-- Returns {0} when refused, {1, stock} for a read (stock false when the key
-- is missing), {1} for a write.
local newest = tonumber(redis.call('HGET', KEYS[2], 'token') or '0')
local token = tonumber(ARGV[1])
if token < newest or (token == newest and redis.call('HGET', KEYS[2], 'owner') ~= ARGV[2]) then
  return {0}
end
redis.call('HSET', KEYS[2], 'token', ARGV[1], 'owner', ARGV[2])
if ARGV[3] == '' then
  return {1, redis.call('GET', KEYS[1])}
end
redis.call('SET', KEYS[1], ARGV[3])
return {1}
