-- keylatch fair lock: how keylatch waiters sit in Redisson's queue (shared by the scripts that
-- change the queue and by the watchdog's refresh). No reads or writes happen at load time.
--
-- A queue holds Redisson and keylatch waiters, in arrival order, in Redisson's keys: the list
-- Q (redisson_lock_queue:{name}) and the zset T (redisson_lock_timeout:{name}). Redisson gives
-- each waiter a score chained on the one before it (its score + threadWaitTime), lowers every
-- score by threadWaitTime on each acquisition (and the scores behind a waiter that gives up),
-- and drops the head once its score has passed. keylatch keeps its waiters' liveness apart, in
-- the zset H ({name}:keylatch_waiters: waiter id -> deadline, refreshed while it lives), and
-- gives each keylatch waiter a score in T that Redisson's arithmetic can live with:
--   its deadline + REDISSON_SLACK + REDISSON_WAIT for every Redisson waiter ahead of it
-- (each of those lowers it once, by its threadWaitTime, when it acquires or gives up). The
-- Redisson waiters chained on a keylatch waiter (behind it, up to the next keylatch waiter)
-- move with its score, and when it leaves the queue they are chained anew on what is ahead of
-- it, as Redisson does for its own waiters.

-- How far beyond its keylatch deadline a keylatch waiter's score in T lies: what Redisson's
-- scripts see of it if no keylatch client is left to evict it (and room for clock skew:
-- Redisson compares with its own clock).
local REDISSON_SLACK = 60000
-- Redisson's default threadWaitTime (fairLockWaitTimeout), assumed for each Redisson waiter
-- ahead of a keylatch waiter.
local REDISSON_WAIT = 300000

local function server_now()
  local clock = redis.call('time')
  return tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
end

local function position(list, id)
  for i = 1, #list do
    if list[i] == id then
      return i
    end
  end
  return nil
end

-- Whether the queue may hold Redisson waiters: T has members that H lacks. (Every keylatch
-- waiter in H is in T; one that Redisson's scripts dropped from T stays in H only until its
-- deadline passes.) Without Redisson waiters nothing is chained and nobody is ahead, so the
-- scripts skip reading the list.
local function mixed(T, H)
  return redis.call('zcard', T) > redis.call('zcard', H)
end

-- Moves by `delta` the scores of the Redisson waiters chained on the keylatch waiter list[i]
-- (score `score`): those behind it, before the next keylatch waiter, scored above it.
local function shift_chain(T, H, list, i, score, delta)
  if delta == 0 then
    return
  end
  for j = i + 1, #list do
    if redis.call('zscore', H, list[j]) then
      return
    end
    local s = redis.call('zscore', T, list[j])
    if s and tonumber(s) > score then
      redis.call('zincrby', T, delta, list[j])
    end
  end
end

-- Queues the keylatch waiter `id` at the back (or keeps its place) with liveness deadline
-- `deadline` (now + `ttl` ms), and sets its score in T. Never puts an expiry on Q or T (it
-- would drop Redisson waiters with them; an expiry left by an older keylatch is removed).
-- The grant offers G live as long as the deadlines H.
local function place(Q, T, H, G, id, deadline, ttl)
  redis.call('persist', Q)
  redis.call('persist', T)
  local keep = ttl + REDISSON_SLACK
  if redis.call('pttl', H) < keep then
    redis.call('pexpire', H, keep)
  end
  if redis.call('pttl', G) < keep then
    redis.call('pexpire', G, keep)
  end
  if not mixed(T, H) then
    if redis.call('zadd', T, deadline + REDISSON_SLACK, id) == 1 then
      redis.call('rpush', Q, id)
    end
    redis.call('zadd', H, deadline, id)
    redis.call('pexpire', H, keep)
    return
  end
  local list = redis.call('lrange', Q, 0, -1)
  local i = position(list, id)
  local old = redis.call('zscore', T, id)
  if not i then
    redis.call('rpush', Q, id)
    list[#list + 1] = id
    i = #list
    old = false
  end
  local ahead = 0
  for j = 1, i - 1 do
    if not redis.call('zscore', H, list[j]) then
      ahead = ahead + 1
    end
  end
  local score = deadline + REDISSON_SLACK + ahead * REDISSON_WAIT
  if old then
    old = tonumber(old)
    shift_chain(T, H, list, i, old, score - old)
  end
  redis.call('zadd', T, score, id)
  redis.call('zadd', H, deadline, id)
  if redis.call('pttl', H) < keep then
    redis.call('pexpire', H, keep)
  end
end

-- Takes the keylatch waiter `id` out of the queue; the Redisson waiters chained on it are
-- chained on the waiter ahead of it, or, when it was first, on the lock's expiry (`pttl` ms
-- from `now`, the score Redisson gives a waiter joining an empty queue, less its wait).
local function unqueue(Q, T, H, id, now, pttl)
  local score = mixed(T, H) and redis.call('zscore', T, id)
  if score then
    local list = redis.call('lrange', Q, 0, -1)
    local i = position(list, id)
    score = tonumber(score)
    local anchor = i and i > 1 and redis.call('zscore', T, list[i - 1])
    if anchor then
      anchor = tonumber(anchor)
    else
      anchor = now + math.max(pttl, 0)
    end
    if i then
      shift_chain(T, H, list, i, score, anchor - score)
    end
  end
  redis.call('zrem', T, id)
  redis.call('lrem', Q, 0, id)
  redis.call('zrem', H, id)
end
