-- keylatch delayed queue: the next element a take would return, without taking it: the
-- destination list's head, else the first element due by now.
-- KEYS[1] the destination list, KEYS[2] the delay zset
local v = redis.call('lindex', KEYS[1], 0)
if v then
  return v
end
local due = redis.call('zrangebyscore', KEYS[2], 0, now_ms(), 'limit', 0, 1)
if due[1] then
  return unpack_element(due[1])
end
return false
