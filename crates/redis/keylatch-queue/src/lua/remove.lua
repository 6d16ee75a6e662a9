-- keylatch delayed queue: remove the first delayed element holding a value, else the first
-- ready one. KEYS[1] the destination list, KEYS[2] the delay zset, KEYS[3] the delay list
-- ARGV[1] the encoded value
-- Returns 1 when one was removed.
local n = redis.call('llen', KEYS[3])
for i = 0, n - 1 do
  local v = redis.call('lindex', KEYS[3], i)
  if v and unpack_element(v) == ARGV[1] then
    redis.call('zrem', KEYS[2], v)
    redis.call('lrem', KEYS[3], 1, v)
    return 1
  end
end
return redis.call('lrem', KEYS[1], 1, ARGV[1])
