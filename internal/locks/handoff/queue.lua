-- The hand-off queue (-wait handoff): functions put in front of every
-- hand-off script (package handoff), so that the queue is written once.
-- A lock's queue is two keys:
--   queue:     a sorted set of waiters in arrival order: member = owner,
--              score = 1 for the first to arrive while the set is empty, then
--              the tail's score + 1 (no clock: scripts run one at a time, so
--              arrival order is exact across every replica);
--   deadlines: a hash, owner -> '<ms> <fenced> <channel>': the ms (Redis's
--              clock) past which its entry is dropped (the waiter gave up, or
--              died without leaving); 1 when the waiter asked for a fencing
--              token, 0 when not (its own wish: with -chaos a fenced and an
--              unfenced sale can share one lock, and the releaser's says
--              nothing about the waiter's); and the channel its grant is
--              published on: its own process's, so a grant reaches only the
--              replica that waits for it.
-- and a third key for the grant in flight:
--   granted:   '<claim deadline ms> <owner>': the owner a release handed the
--              lock to, until it claims it (claim.lua). A waiter can die between queueing and its grant;
--              its grant then expires after the claim deadline instead of a
--              whole lease (or never: v3), and the check at that deadline
--              (reclaim.lua) passes the lock to the next waiter.

-- Redis's clock, in ms.
local function handoff_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Queue owner at the tail, to wait wait_ms and be told on channel, handed a
-- fencing token when fenced is '1'; an owner already queued keeps its place.
local function handoff_enqueue(queue, deadlines, owner, wait_ms, channel, fenced)
  assert(channel and channel ~= '', 'handoff: a waiter needs a channel to be told on')
  assert(fenced == '0' or fenced == '1', 'handoff: a waiter says whether it is fenced, 0 or 1')
  if redis.call('ZSCORE', queue, owner) then
    return
  end
  local score = 1
  local tail = redis.call('ZRANGE', queue, -1, -1, 'WITHSCORES')
  if tail[2] then
    score = tonumber(tail[2]) + 1
  end
  local now = handoff_now()
  redis.call('ZADD', queue, score, owner)
  redis.call('HSET', deadlines, owner, string.format('%d', now + wait_ms) .. ' ' .. fenced .. ' ' .. channel)
end

-- Take owner out of the queue; true when it was in it.
local function handoff_dequeue(queue, deadlines, owner)
  redis.call('HDEL', deadlines, owner)
  return redis.call('ZREM', queue, owner) == 1
end

-- Take the first waiter whose deadline has not passed out of the queue and
-- return it, its channel and whether it is fenced ('1' or '0'), dropping the
-- dead entries before it; nil when none waits.
local function handoff_next(queue, deadlines)
  local now = handoff_now()
  while true do
    local head = redis.call('ZPOPMIN', queue)[1]
    if not head then
      return nil
    end
    local entry = redis.call('HGET', deadlines, head)
    redis.call('HDEL', deadlines, head)
    if entry then
      local deadline, fenced, channel = string.match(entry, '^(%d+) ([01]) (.+)$')
      if deadline and tonumber(deadline) > now then
        return head, channel, fenced
      end
    end
  end
end

-- Give the lock to owner, just taken off the queue, until it claims it: the
-- lock expires after claim_ms whatever the version's lease (v3's none too),
-- and granted holds '<claim deadline ms> <owner>' until then. kind is the
-- lock's: 'string' (v3 to v6) or 'hash' (v7, v8: one hold). The marker
-- outlives the claim deadline, so the check made after it still finds it.
local function handoff_give(lock, granted, kind, owner, claim_ms)
  if kind == 'hash' then
    redis.call('DEL', lock)
    redis.call('HSET', lock, owner, 1)
    redis.call('PEXPIRE', lock, claim_ms)
  else
    redis.call('SET', lock, owner, 'PX', claim_ms)
  end
  local deadline = handoff_now() + tonumber(claim_ms)
  redis.call('SET', granted, string.format('%d', deadline) .. ' ' .. owner, 'PX', tonumber(claim_ms) * 10)
end

-- The grant in flight: its claim deadline (ms) and owner; nil when none.
local function handoff_granted(granted)
  local g = redis.call('GET', granted)
  if not g then
    return nil
  end
  local deadline, owner = string.match(g, '^(%d+) (.+)$')
  return tonumber(deadline), owner
end

-- owner holds the lock by its own attempt or claim: a grant to it is settled.
local function handoff_settle(granted, owner)
  local _, grantee = handoff_granted(granted)
  if grantee == owner then
    redis.call('DEL', granted)
  end
end

-- Tell owner, just made the lock's holder, that it holds it, with a fencing
-- token issued now from counter when it queued fenced (fenced is '1',
-- handoff_next's; 0: unfenced), on the channel it queued with: only its
-- replica receives it.
local function handoff_grant(counter, fenced, channel, owner)
  local token = 0
  if fenced == '1' then
    token = redis.call('INCR', counter)
  end
  redis.call('PUBLISH', channel, owner .. ' ' .. string.format('%d', token))
end


-- Hand the lock to the first waiter still queued, for claim_ms, and tell it,
-- with a new token when that waiter queued fenced (whatever the releaser
-- is); or free the lock when none waits. Uses the hand-off scripts' KEYS
-- (package handoff, Keys.List): lock, counter, queue, deadlines, grant
-- marker. kind is the lock's ('string' or 'hash'). Returns the owner the
-- lock went to, or nil when it was freed.
local function handoff_pass(kind, claim_ms)
  local next, channel, fenced = handoff_next(KEYS[3], KEYS[4])
  if not next then
    redis.call('DEL', KEYS[1])
    return nil
  end
  handoff_give(KEYS[1], KEYS[5], kind, next, claim_ms)
  handoff_grant(KEYS[2], fenced, channel, next)
  return next
end
