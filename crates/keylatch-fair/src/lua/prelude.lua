-- keylatch fair lock: the part shared by every script that changes the queue.
-- KEYS[1] the lock hash, KEYS[2] the queue (list of waiter ids, first come first),
-- KEYS[3] the waiters' deadlines (zset: waiter id -> server time in ms),
-- KEYS[4] the wake-up channel prefix: a waiter's channel is KEYS[4] .. ':' .. its id.
-- Deadlines use the server's clock (TIME), never a client's.
-- Every script reads each key it writes before its first write, so a key of another type
-- raises WRONGTYPE while nothing has been written yet.
local clock = redis.call('time')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
-- The head before this script, and the dead waiters (deadline passed: nobody refreshed it),
-- at most 100 at a time.
local before = redis.call('lindex', KEYS[2], 0)
local dead = redis.call('zrangebyscore', KEYS[3], '-inf', now, 'LIMIT', 0, 100)

-- Drops the dead waiters, then the head until it is live (an id without a deadline counts as
-- dead). Returns the live head and its deadline, or false when nobody is left. `changed`: the
-- queue was changed since `before` was read.
local function evict(changed)
  for _, id in ipairs(dead) do
    redis.call('zrem', KEYS[3], id)
    redis.call('lrem', KEYS[2], 0, id)
  end
  local head = before
  if changed or #dead > 0 then
    head = redis.call('lindex', KEYS[2], 0)
  end
  while head do
    local deadline = redis.call('zscore', KEYS[3], head)
    if deadline and tonumber(deadline) > now then
      return head, tonumber(deadline)
    end
    redis.call('lpop', KEYS[2])
    if deadline then
      redis.call('zrem', KEYS[3], head)
    end
    head = redis.call('lindex', KEYS[2], 0)
  end
  return false, 0
end

-- Wakes one waiter, on its own channel.
local function wake(id)
  redis.call('publish', KEYS[4] .. ':' .. id, '0')
end
