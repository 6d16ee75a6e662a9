-- keylatch read-write lock: release one read hold.
-- KEYS[1] the lock hash, KEYS[2] the wake-up channel (redisson_rwlock:{name})
-- ARGV[1] owner id, ARGV[2] 'any', or the hold count the owner must have (the undo of a
-- request whose outcome is unknown: release only if that request took effect)
-- Returns nil (the owner holds no read hold: nothing changed), -1 (the count differs: nothing
-- changed), 0 (released; the lock is still held), 1 (released; the lock is free and '0' was
-- published).
local got = redis.call('hmget', KEYS[1], 'mode', ARGV[1])
local mode = got[1]
local count = tonumber(got[2])
if not count or (mode ~= 'read' and mode ~= 'write') then
  return nil
end
if ARGV[2] ~= 'any' and count ~= tonumber(ARGV[2]) then
  return -1
end
local prefix = KEYS[1]
if not string.find(prefix, '{', 1, true) then
  prefix = '{' .. prefix .. '}'
end
local key = prefix .. ':' .. ARGV[1] .. ':rwlock_timeout:' .. count
local released = redis.call('pttl', key)
redis.call('del', key)
if count > 1 then
  redis.call('hincrby', KEYS[1], ARGV[1], -1)
else
  redis.call('hdel', KEYS[1], ARGV[1])
end
if mode == 'write' then
  -- The writer's own read hold: its write hold keeps the lock.
  return 0
end
-- The lock lives as long as its longest remaining read hold. Every script keeps the hash's
-- TTL at least as long as each hold's, and at most SLACK ms longer than the longest one's
-- (ms rounding, and the time between setting a hold's key and the hash). So when the released
-- hold would have expired well before the hash, or another hold lasts about as long as the
-- hash, nothing changes. Otherwise the hash takes the longest remaining hold's TTL, and readers
-- whose holds have all expired (their process died) are dropped from it.
local SLACK = 25
local ttl = redis.call('pttl', KEYS[1])
if released > 0 and released + SLACK < ttl then
  return 0
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
        if left + SLACK >= ttl then
          return 0
        end
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
  return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], '0')
return 1
