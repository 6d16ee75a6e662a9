-- keylatch semaphore: set the available permit count, whatever it was (Redisson's setPermits).
-- KEYS[1] the permit count, KEYS[2] the wake-up channel
-- ARGV[1] the permit count
-- Returns 1 and publishes the count. Setting a count is idempotent, so a retry after a lost
-- reply needs no marker. A key of another type is refused with WRONGTYPE before any write.
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'string' then
  return redis.error_reply('WRONGTYPE the permit count is not a string')
end
redis.call('set', KEYS[1], ARGV[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1
