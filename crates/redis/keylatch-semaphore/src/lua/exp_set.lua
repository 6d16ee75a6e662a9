-- keylatch permit-expirable semaphore: set the total (Redisson's setPermits): the available count
-- becomes the total less the permits held (negative while more are held than the new total).
-- KEYS[1] the available count, KEYS[2] the timeout zset, KEYS[3] the wake-up channel,
-- KEYS[4] the total of older keylatch versions (deleted)
-- ARGV[1] the total
-- Returns 1 and publishes the new available count. Setting a total is idempotent. Expired
-- permits are reclaimed first.
local _, available = reclaim()
if not available then
  return redis.error_reply(NOT_A_COUNT)
end
local count = tonumber(ARGV[1]) - redis.call('zcard', KEYS[2])
redis.call('set', KEYS[1], count)
redis.call('del', KEYS[4])
redis.call('publish', KEYS[3], count)
return 1
