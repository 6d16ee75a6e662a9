-- keylatch read-write lock: release whoever holds it.
-- KEYS[1] the lock hash, KEYS[2] the wake-up channel
-- ARGV[1] 'read' or 'write' (release only in that mode, as Redisson's read and write locks
-- do) or 'any'
-- Deletes the hash and every per-hold key it names, publishes '0' (it was read-locked) or '1'
-- (write-locked). Returns 1 when it released, 0 otherwise. WRONGTYPE for a key that is not a
-- hash; a hash without 'mode' (another primitive's) is left alone.
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode or (ARGV[1] ~= 'any' and mode ~= ARGV[1]) then
  return 0
end
local prefix = KEYS[1]
if not string.find(prefix, '{', 1, true) then
  prefix = '{' .. prefix .. '}'
end
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields, 2 do
  local field = fields[i]
  if field ~= 'mode' then
    local n = tonumber(fields[i + 1]) or 0
    for j = 1, n do
      redis.call('del', prefix .. ':' .. field .. ':rwlock_timeout:' .. j)
    end
  end
end
redis.call('del', KEYS[1])
if mode == 'write' then
  redis.call('publish', KEYS[2], '1')
else
  redis.call('publish', KEYS[2], '0')
end
return 1
