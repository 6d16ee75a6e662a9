-- keylatch delayed queue: remove the first delayed element holding a value (in offer order in
-- the delay list, else, for elements of the lean layout, in due order in the zset), else the
-- first ready one. KEYS[1] the destination list, KEYS[2] the delay zset, KEYS[3] the delay list
-- ARGV[1] the encoded value
-- Returns 1 when one was removed.
for _, v in ipairs(redis.call('lrange', KEYS[3], 0, -1)) do
  if unpack_element(v) == ARGV[1] then
    redis.call('zrem', KEYS[2], v)
    redis.call('lrem', KEYS[3], 1, v)
    return 1
  end
end
for _, v in ipairs(redis.call('zrange', KEYS[2], 0, -1)) do
  if unpack_element(v) == ARGV[1] then
    redis.call('zrem', KEYS[2], v)
    return 1
  end
end
return redis.call('lrem', KEYS[1], 1, ARGV[1])
