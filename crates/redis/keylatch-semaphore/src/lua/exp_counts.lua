-- keylatch permit-expirable semaphore: the counts, after reclaiming expired permits.
-- KEYS[1] the available count, KEYS[2] the timeout zset, KEYS[3] the wake-up channel,
-- KEYS[4] the total of older keylatch versions (not read)
-- Returns {available, acquired, total}: the total is available + acquired, as Redisson counts
-- it, or -1 when the semaphore was never set up.
local value, available = reclaim()
if not available then
  return redis.error_reply(NOT_A_COUNT)
end
local acquired = redis.call('zcard', KEYS[2])
local total = -1
if value or acquired > 0 then
  total = available + acquired
end
return {available, acquired, total}
