-- keylatch fair lock: release whoever holds it, and hand the lock to the head of the queue or
-- wake it (even when the lock was already free: a nudge for a head that would otherwise wait
-- for its timer).
-- Returns 1 when it was held, 0 when it was free. Refuses (WRONGTYPE) a key that is not a hash.
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE the lock key holds a ' .. kind)
end
local released = redis.call('del', KEYS[1])
local head = evict(false)
if head then
  hand_off(head)
end
return released
