-- keylatch read-write lock: take a read hold, or re-enter one.
-- KEYS[1] the lock hash, KEYS[2] the writer-intent zset ({name}:write_intent)
-- ARGV[1] lease in ms, ARGV[2] owner id, ARGV[3] the owner's write field (<owner id>:write)
-- Returns nil when acquired (Redisson's convention); otherwise how long to wait before
-- retrying, in ms: the lock's PTTL, or the time left on the first waiting writer's intent
-- (-1: the lock is held without an expiry).
-- Every check comes before the first write, so a refusal or an error (WRONGTYPE) changes nothing.
local got = redis.call('hmget', KEYS[1], 'mode', ARGV[2])
local mode = got[1]
local reentering = got[2] ~= false
local pttl = redis.call('pttl', KEYS[1])
if pttl == -1 then
  return -1
end
if mode == false then
  if pttl ~= -2 then
    -- A hash without 'mode': another primitive (a plain lock) holds this name.
    return pttl
  end
elseif mode == 'write' then
  -- Only the writer itself may also read (downgrade).
  if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return pttl
  end
  reentering = true
elseif mode ~= 'read' then
  return pttl
end
if not reentering and redis.call('exists', KEYS[2]) == 1 then
  -- A new reader waits behind any writer that is waiting (no writer starvation).
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('zremrangebyscore', KEYS[2], '-inf', now)
  local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
  if first[1] then
    local wait = tonumber(first[2]) - now
    if pttl > 0 and pttl < wait then
      wait = pttl
    end
    return wait
  end
end
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'read')
end
local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
local prefix = KEYS[1]
if not string.find(prefix, '{', 1, true) then
  prefix = '{' .. prefix .. '}'
end
redis.call('set', prefix .. ':' .. ARGV[2] .. ':rwlock_timeout:' .. n, 1, 'PX', ARGV[1])
-- The hash lives as long as its longest hold.
if pttl < tonumber(ARGV[1]) then
  redis.call('pexpire', KEYS[1], ARGV[1])
end
return nil
