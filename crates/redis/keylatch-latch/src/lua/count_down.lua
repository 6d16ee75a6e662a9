-- keylatch count-down latch: count down by one (Redisson's countDown).
-- KEYS[1] the count, KEYS[2] the latch's channel
-- Returns the count left. At zero (or below) the key is deleted, and reaching zero publishes
-- Redisson's zero-count message, 0. A missing latch (count 0) is left alone: Redisson's
-- DECR-then-DEL leaves nothing either. A key that is not an integer is refused with
-- WRONGTYPE, before any write.
if redis.call('exists', KEYS[1]) == 0 then
  return 0
end
local v = redis.pcall('decr', KEYS[1])
if type(v) == 'table' then
  return redis.error_reply('WRONGTYPE the latch count is not an integer')
end
if v <= 0 then
  redis.call('del', KEYS[1])
end
if v == 0 then
  redis.call('publish', KEYS[2], '0')
end
if v < 0 then
  return 0
end
return v
