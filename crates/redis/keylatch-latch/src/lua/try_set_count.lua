-- keylatch count-down latch: set the count if the latch does not exist (Redisson's
-- trySetCount).
-- KEYS[1] the count, KEYS[2] the latch's channel
-- ARGV[1] the count (at least 1)
-- Returns 1 when set (and publishes Redisson's new-count message, 1), 0 when the latch
-- exists. A key that is not an integer string is refused with WRONGTYPE, before any write.
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
  redis.call('set', KEYS[1], ARGV[1])
  redis.call('publish', KEYS[2], '1')
  return 1
end
if kind ~= 'string' then
  return redis.error_reply('WRONGTYPE the latch count is not a string')
end
local value = redis.call('get', KEYS[1])
if not (#value <= 20 and string.match(value, '^%-?%d+$')) then
  return redis.error_reply('WRONGTYPE the latch count is not an integer')
end
return 0
