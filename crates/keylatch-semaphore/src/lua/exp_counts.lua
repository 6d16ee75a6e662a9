-- keylatch permit-expirable semaphore: the counts, after reclaiming expired permits.
-- KEYS[1] the available count, KEYS[2] the timeout zset, KEYS[3] the wake-up channel,
-- KEYS[4] the configured total
-- Returns {available, acquired, total}; total is -1 when the semaphore was never set up.
local value, available = reclaim()
if not available then
  return redis.error_reply(NOT_A_COUNT)
end
local acquired = redis.call('zcard', KEYS[2])
local total = redis.call('get', KEYS[4])
if total then
  total = integer(total)
  if not total then
    return redis.error_reply(NOT_A_TOTAL)
  end
elseif value or acquired > 0 then
  total = available + acquired
else
  total = -1
end
return {available, acquired, total}
