-- keylatch read-write lock: release one write hold.
-- KEYS[1] the lock hash, KEYS[2] the wake-up channel (redisson_rwlock:{name})
-- ARGV[1] the owner's write field (<owner id>:write), ARGV[2] 'any', or the hold count the
-- owner must have (the undo of a request whose outcome is unknown)
-- Returns nil (not the writer: nothing changed), -1 (the count differs: nothing changed),
-- 0 (released; still held for writing, reentrant), 1 (the write hold is gone: '1' published;
-- the writer's own read holds, if any, remain and the lock is in read mode).
local mode = redis.call('hget', KEYS[1], 'mode')
if mode ~= 'write' then
  return nil
end
local count = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
if not count then
  return nil
end
if ARGV[2] ~= 'any' and count ~= tonumber(ARGV[2]) then
  return -1
end
if count > 1 then
  redis.call('hincrby', KEYS[1], ARGV[1], -1)
  return 0
end
redis.call('hdel', KEYS[1], ARGV[1])
if redis.call('hlen', KEYS[1]) > 1 then
  -- Downgrade: the writer's read holds remain. The lock lives as long as the longest of them.
  redis.call('hset', KEYS[1], 'mode', 'read')
  local prefix = KEYS[1]
  if not string.find(prefix, '{', 1, true) then
    prefix = '{' .. prefix .. '}'
  end
  local longest = 0
  local fields = redis.call('hgetall', KEYS[1])
  for i = 1, #fields, 2 do
    local field = fields[i]
    if field ~= 'mode' then
      local live = false
      local n = tonumber(fields[i + 1]) or 0
      for j = n, 1, -1 do
        local left = redis.call('pttl', prefix .. ':' .. field .. ':rwlock_timeout:' .. j)
        if left > 0 then
          live = true
          if left > longest then
            longest = left
          end
        end
      end
      if not live then
        redis.call('hdel', KEYS[1], field)
      end
    end
  end
  if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
  else
    redis.call('del', KEYS[1])
  end
else
  redis.call('del', KEYS[1])
end
redis.call('publish', KEYS[2], '1')
return 1
