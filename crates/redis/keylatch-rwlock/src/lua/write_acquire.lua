-- keylatch read-write lock: take the write hold, or re-enter it.
-- KEYS[1] the lock hash, KEYS[2] the writer-intent zset ({name}:write_intent),
-- KEYS[3] the fencing counter (redisson_lock_token:{name})
-- ARGV[1] lease in ms, ARGV[2] owner id, ARGV[3] the owner's write field (<owner id>:write),
-- ARGV[4] the intent timeout in ms ('0': record no intent, the caller will not wait),
-- ARGV[5] '1' to issue a fencing token
-- Returns nil when acquired ({token} when acquired with fencing); -3 when the owner holds a read hold in read mode (an upgrade:
-- refused before anything is written); -1 when the lock is held without an expiry; otherwise
-- the lock's PTTL in ms, after recording (or refreshing) the owner's intent to write.
-- A damaged fencing counter is refused before anything is written.
if ARGV[5] == '1' then
  local counter = redis.call('get', KEYS[3])
  if counter and not (#counter <= 18 and string.match(counter, '^%d+$')) then
    return redis.error_reply('WRONGTYPE the fencing counter is not an integer')
  end
end
local intent_kind = redis.call('type', KEYS[2])['ok']
if intent_kind ~= 'none' and intent_kind ~= 'zset' then
  return redis.error_reply('WRONGTYPE the writer-intent key is not a zset')
end
local mode = redis.call('hget', KEYS[1], 'mode')
local pttl = redis.call('pttl', KEYS[1])
if pttl == -1 then
  return -1
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[3], 1)
  if pttl < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
  end
  if ARGV[5] == '1' then
    return {next_token(KEYS[3])}
  end
  return nil
end
if mode == 'read' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  return -3
end
if mode == false and pttl == -2 then
  redis.call('hset', KEYS[1], 'mode', 'write', ARGV[3], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  -- No longer waiting (an empty zset disappears by itself).
  redis.call('zrem', KEYS[2], ARGV[2])
  if ARGV[5] == '1' then
    return {next_token(KEYS[3])}
  end
  return nil
end
if ARGV[4] ~= '0' then
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('zadd', KEYS[2], now + tonumber(ARGV[4]), ARGV[2])
  if redis.call('pttl', KEYS[2]) < tonumber(ARGV[4]) then
    redis.call('pexpire', KEYS[2], ARGV[4])
  end
end
return pttl
