-- keylatch fair lock: release whoever holds it, and hand the lock to the head of the queue or
-- wake it (even when the lock was already free: a nudge for a head that would otherwise wait
-- for its timer).
-- Returns 1 when it was held, 0 when it was free. Refuses (WRONGTYPE) a key that is not a hash.
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE the lock key holds a ' .. kind)
end
-- The holders' grant marks, if any, go with their holds.
if kind == 'hash' then
  for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    redis.call('hdel', KEYS[6], field)
  end
end
local released = redis.call('del', KEYS[1])
local head, deadline = evict(false)
if head then
  hand_off(head, deadline)
end
return released
