-- keylatch count-down latch: delete it (Redisson's delete).
-- KEYS[1] the count, KEYS[2] the latch's channel
-- Returns 1 when it existed (and publishes Redisson's new-count message, 1, as Redisson's
-- delete does), 0 otherwise. A key that is not a string is refused with WRONGTYPE.
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
  return 0
end
if kind ~= 'string' then
  return redis.error_reply('WRONGTYPE the latch count is not a string')
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], '1')
return 1
