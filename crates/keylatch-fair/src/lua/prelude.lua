-- keylatch fair lock: the part shared by every script that changes the queue (after
-- queue_lib.lua).
-- KEYS[1] the lock hash, KEYS[2] the queue (list of waiter ids, first come first),
-- KEYS[3] Redisson's waiter scores (zset), KEYS[4] the wake-up channel prefix: a waiter's
-- channel is KEYS[4] .. ':' .. its id, KEYS[5] keylatch waiters' deadlines (zset: waiter id ->
-- server time in ms).
-- Deadlines use the server's clock (TIME), never a client's.
-- Every script reads each key it writes before its first write, so a key of another type
-- raises WRONGTYPE while nothing has been written yet.
local now = server_now()
redis.call('zcard', KEYS[3])
-- The head before this script, and the dead keylatch waiters (deadline passed: nobody
-- refreshed it), at most 100 at a time.
local before = redis.call('lindex', KEYS[2], 0)
local dead = redis.call('zrangebyscore', KEYS[5], '-inf', now, 'LIMIT', 0, 100)

local function leave_queue(id)
  unqueue(KEYS[2], KEYS[3], KEYS[5], id, now, redis.call('pttl', KEYS[1]))
end

-- Drops the dead keylatch waiters, then the head until it is live: a keylatch waiter whose
-- deadline has not passed, or a Redisson waiter whose score has not (Redisson's own rule: a
-- Redisson waiter is judged only at the head; one without a score is dropped). Returns the
-- live head and its deadline, or false when nobody is left. `changed`: the queue was changed
-- since `before` was read.
local function evict(changed)
  for _, id in ipairs(dead) do
    leave_queue(id)
  end
  local head = before
  if changed or #dead > 0 then
    head = redis.call('lindex', KEYS[2], 0)
  end
  while head do
    local beat = redis.call('zscore', KEYS[5], head)
    if beat then
      if tonumber(beat) > now then
        return head, tonumber(beat)
      end
      leave_queue(head)
    else
      local score = redis.call('zscore', KEYS[3], head)
      if score and tonumber(score) > now then
        return head, tonumber(score)
      end
      redis.call('lpop', KEYS[2])
      if score then
        redis.call('zrem', KEYS[3], head)
      end
    end
    head = redis.call('lindex', KEYS[2], 0)
  end
  return false, 0
end

-- Wakes one waiter, on its own channel.
local function wake(id)
  redis.call('publish', KEYS[4] .. ':' .. id, '0')
end
