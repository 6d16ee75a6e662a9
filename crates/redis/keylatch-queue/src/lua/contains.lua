-- keylatch delayed queue: whether a value is delayed (in the zset, which holds every delayed
-- element of both layouts) or ready.
-- KEYS[1] the destination list, KEYS[2] the delay zset; ARGV[1] the encoded value
for _, v in ipairs(redis.call('zrange', KEYS[2], 0, -1)) do
  if unpack_element(v) == ARGV[1] then
    return 1
  end
end
if redis.call('lpos', KEYS[1], ARGV[1]) then
  return 1
end
return 0
