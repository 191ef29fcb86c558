-- The hand-off queue (-wait handoff): functions put in front of every
-- hand-off script (package handoff), so that the queue is written once.
-- A lock's queue is two keys:
--   queue:     a sorted set of waiters in arrival order: member = owner,
--              score = 1 for the first to arrive while the set is empty, then
--              the tail's score + 1 (no clock: scripts run one at a time, so
--              arrival order is exact across every replica);
--   deadlines: a hash, owner -> '<ms> <channel>': the ms (Redis's clock) past
--              which its entry is dropped (the waiter gave up, or died without
--              leaving), and the channel its grant is published on: its own
--              process's, so a grant reaches only the replica that waits for it.

-- Queue owner at the tail, to wait wait_ms and be told on channel; an owner
-- already queued keeps its place.
local function handoff_enqueue(queue, deadlines, owner, wait_ms, channel)
  assert(channel and channel ~= '', 'handoff: a waiter needs a channel to be told on')
  if redis.call('ZSCORE', queue, owner) then
    return
  end
  local score = 1
  local tail = redis.call('ZRANGE', queue, -1, -1, 'WITHSCORES')
  if tail[2] then
    score = tonumber(tail[2]) + 1
  end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZADD', queue, score, owner)
  redis.call('HSET', deadlines, owner, string.format('%d', now + wait_ms) .. ' ' .. channel)
end

-- Take owner out of the queue; true when it was in it.
local function handoff_dequeue(queue, deadlines, owner)
  redis.call('HDEL', deadlines, owner)
  return redis.call('ZREM', queue, owner) == 1
end

-- Take the first waiter whose deadline has not passed out of the queue and
-- return it and its channel, dropping the dead entries before it; nil when
-- none waits.
local function handoff_next(queue, deadlines)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  while true do
    local head = redis.call('ZPOPMIN', queue)[1]
    if not head then
      return nil
    end
    local entry = redis.call('HGET', deadlines, head)
    redis.call('HDEL', deadlines, head)
    if entry then
      local deadline, channel = string.match(entry, '^(%d+) (.+)$')
      if deadline and tonumber(deadline) > now then
        return head, channel
      end
    end
  end
end

-- Tell owner, just made the lock's holder, that it holds it, with a fencing
-- token issued now from counter when fenced is '1' (0: unfenced), on the
-- channel it queued with (handoff_next's): only its replica receives it.
local function handoff_grant(counter, fenced, channel, owner)
  local token = 0
  if fenced == '1' then
    token = redis.call('INCR', counter)
  end
  redis.call('PUBLISH', channel, owner .. ' ' .. string.format('%d', token))
end

