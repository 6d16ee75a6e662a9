-- keylatch delayed queue: whether a value is delayed or ready.
-- KEYS[1] the destination list, KEYS[3] the delay list; ARGV[1] the encoded value
local n = redis.call('llen', KEYS[3])
for i = 0, n - 1 do
  local v = redis.call('lindex', KEYS[3], i)
  if v and unpack_element(v) == ARGV[1] then
    return 1
  end
end
if redis.call('lpos', KEYS[1], ARGV[1]) then
  return 1
end
return 0
