-- keylatch delayed queue: undo a take whose reply was lost.
-- KEYS[1] the destination list, KEYS[2] the take's claim
-- ARGV[1] the tombstone's ttl in ms
-- If the take ran, its element goes back to the head of the destination list; either way the
-- claim becomes a tombstone, so a take still on its way takes nothing. Idempotent.
-- Returns 1 when an element was put back.
local claim = redis.call('get', KEYS[2])
redis.call('set', KEYS[2], '0', 'px', ARGV[1])
if claim and string.sub(claim, 1, 1) == '1' then
  redis.call('lpush', KEYS[1], string.sub(claim, 2))
  return 1
end
return 0
