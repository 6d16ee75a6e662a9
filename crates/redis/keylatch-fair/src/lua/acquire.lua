-- keylatch fair lock: acquire, re-enter, or take (or keep) a place in the queue.
-- ARGV[1] lease in ms, ARGV[2] owner id (also the waiter id), ARGV[3] waiter timeout in ms,
-- ARGV[4] '1' to issue a fencing token, ARGV[5] '1' to join the queue when refused
-- ('0': try once, never queue), ARGV[6] how many guards the caller's client has on the owner's
-- hold, ARGV[7] the lease in ms of a hold handed to the waiter on release ('0': the waiter
-- does not accept grants; see hand_off), ARGV[8] this attempt's number within its wait (the
-- grant's letter names the attempt whose offer it answers), ARGV[9] '1' for a non-reentrant
-- lock (Redisson's RedissonNonReentrantFairLock: same layout)
-- Returns nil when acquired, {token} when acquired with fencing, -1 when the lock is held
-- without an expiry, -3 when the lock is non-reentrant and the owner already holds it
-- (nothing changed), otherwise how long (ms, > 0) the caller may sleep before trying again:
-- the holder's PTTL for the head of the queue, the head's deadline for everyone behind it.
-- A damaged fencing counter is refused before anything is written.
if ARGV[4] == '1' and not counter_ok() then
  return redis.error_reply('WRONGTYPE the fencing counter is not an integer')
end
local id = ARGV[2]

local function grant()
  local token = false
  if ARGV[4] == '1' then
    token = next_token(KEYS[7])
  end
  -- A mark left by a grant that is gone (expired, force-unlocked) is no longer true.
  redis.call('hdel', KEYS[6], id)
  redis.call('hincrby', KEYS[1], id, 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  if token then
    return {token}
  end
  return nil
end

if redis.call('hexists', KEYS[1], id) == 1 then
  local mark = granted(id)
  if mark and ARGV[6] == '0' and ARGV[7] ~= '0' then
    -- The lock was handed to this wait (only a wait that made an offer takes a grant) on
    -- release, and it has not taken the letter: this reply gives it the hold, with the lease it
    -- asks for now.
    redis.call('hdel', KEYS[6], id)
    redis.call('pexpire', KEYS[1], ARGV[1])
    local token = string.match(mark, '^=(%d+):')
    if token then
      return {tonumber(token)}
    end
    return nil
  end
  if ARGV[9] == '1' then
    return -3
  end
  -- Re-entry. (A queue entry of the same owner, from a concurrent wait, goes.)
  local reply = grant()
  if redis.call('zscore', KEYS[3], id) then
    leave_queue(id)
  end
  return reply
end
local pttl = redis.call('pttl', KEYS[1])
if pttl == -1 then
  return -1
end

local head, head_deadline = evict(false)
local free = pttl == -2
if free and (not head or head == id) then
  local reply = grant()
  if head == id then
    -- The Redisson waiters chained on this one are chained on the new hold's expiry.
    leave_queue(id)
  end
  return reply
end
if head and head ~= before and head ~= id then
  -- Evictions made someone else head: it need not wait for its own timer (and gets a free
  -- lock handed to it, if it accepts that).
  if free then
    hand_off(head, head_deadline)
  else
    wake(head)
  end
end

if ARGV[5] == '1' then
  local ttl = tonumber(ARGV[3])
  local deadline = now + ttl
  if ARGV[7] ~= '0' then
    redis.call('hset', KEYS[6], id, ARGV[7] .. ',' .. ARGV[4] .. ',' .. ARGV[8])
  else
    redis.call('hdel', KEYS[6], id)
  end
  place(KEYS[2], KEYS[3], KEYS[5], KEYS[6], id, deadline, ttl)
  if not head then
    head = id
  elseif head == id then
    head_deadline = deadline
  end
end
if not free and (not head or head == id) then
  return math.max(pttl, 1)
end
return math.max(head_deadline - now + 1, 1)
