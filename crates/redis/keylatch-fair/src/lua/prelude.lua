-- keylatch fair lock: the part shared by every script that changes the queue (after
-- queue_lib.lua).
-- KEYS[1] the lock hash, KEYS[2] the queue (list of waiter ids, first come first),
-- KEYS[3] Redisson's waiter scores (zset), KEYS[4] the wake-up channel prefix: a waiter's
-- channel is KEYS[4] .. ':' .. its id, KEYS[5] keylatch waiters' deadlines (zset: waiter id ->
-- server time in ms), KEYS[6] keylatch waiters' grant offers and marks (hash, see hand_off),
-- KEYS[7] the fencing counter.
-- Deadlines use the server's clock (TIME), never a client's.
-- Every script reads each key it writes before its first write, so a key of another type
-- raises WRONGTYPE while nothing has been written yet.
local now = server_now()
redis.call('zcard', KEYS[3])
redis.call('hlen', KEYS[6])
-- The head before this script, and the dead keylatch waiters (deadline passed: nobody
-- refreshed it), at most 100 at a time.
local before = redis.call('lindex', KEYS[2], 0)
local dead = redis.call('zrangebyscore', KEYS[5], '-inf', now, 'LIMIT', 0, 100)

local function leave_queue(id)
  unqueue(KEYS[2], KEYS[3], KEYS[5], id, now, redis.call('pttl', KEYS[1]))
  redis.call('hdel', KEYS[6], id)
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

-- Whether KEYS[7] can issue a fencing token (absent, or an integer string).
local function counter_ok()
  local kind = redis.call('type', KEYS[7])['ok']
  if kind == 'none' then
    return true
  end
  if kind ~= 'string' then
    return false
  end
  local counter = redis.call('get', KEYS[7])
  return #counter <= 18 and string.match(counter, '^%d+$') ~= nil
end

-- A grant mark: the value KEYS[6] holds for a waiter the lock was handed to,
-- '=<token>:<attempt>' (no token without fencing; <attempt>: the waiter's attempt that made
-- the offer), until the waiter's hold is released or an attempt of the waiter takes it.
local function granted(id)
  local mark = redis.call('hget', KEYS[6], id)
  if mark and string.sub(mark, 1, 1) == '=' then
    return mark
  end
  return false
end

-- The lock is free and `head` is the live head of the queue, alive until `deadline` (server
-- ms): hand the lock to it when it is a keylatch waiter that accepts grants (its offer in
-- KEYS[6] is '<lease ms>,<fencing 0|1>,<attempt>'). Its hold is written with that lease, cut
-- to what is left of its deadline (so a grant to a waiter that died just now holds the queue
-- no longer than its deadline would have; the waiter counts the lease from before its last
-- refresh or attempt, which set that deadline, so it never counts past it), it leaves the
-- queue, its offer becomes the grant mark, and the mark is published on its channel: the
-- waiter has the lock when the message arrives, with no request of its own. Any other head
-- (a Redisson waiter, a keylatch waiter without an offer) is woken to try for itself.
local function hand_off(head, deadline)
  local offer = redis.call('hget', KEYS[6], head)
  local lease, fencing, attempt
  if offer then
    lease, fencing, attempt = string.match(offer, '^(%d+),([01]),(%d+)$')
  end
  if lease then
    lease = math.min(tonumber(lease), deadline - now)
  end
  if not lease or lease < 1 or (fencing == '1' and not counter_ok()) then
    wake(head)
    return
  end
  local token = ''
  if fencing == '1' then
    token = string.format('%d', next_token(KEYS[7]))
  end
  local mark = '=' .. token .. ':' .. attempt
  redis.call('hset', KEYS[1], head, 1)
  redis.call('pexpire', KEYS[1], lease)
  -- Out of the queue; the Redisson waiters chained on it are chained on the new hold's expiry
  -- (`lease` from now). Its offer becomes the mark, so KEYS[6] keeps the expiry the head's
  -- last place() gave it: 60 s past the head's deadline, beyond the grant's end.
  unqueue(KEYS[2], KEYS[3], KEYS[5], head, now, lease)
  redis.call('hset', KEYS[6], head, mark)
  redis.call('publish', KEYS[4] .. ':' .. head, mark)
end
