-- The storage's side of fencing: write the stock only for the newest holder.
-- KEYS[1]: the stock key.
-- KEYS[2]: the highest fencing token the stock has accepted.
-- ARGV[1]: the new stock.
-- ARGV[2]: the writer's token.
-- Returns 1 when written, 0 when refused: a later holder (a higher token) has
-- already written, so this writer's lock had expired under it.
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[2]) < last then
  return 0
end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SET', KEYS[1], ARGV[1])
return 1
