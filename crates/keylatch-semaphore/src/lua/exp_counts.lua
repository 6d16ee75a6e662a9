-- keylatch permit-expirable semaphore: the counts, after reclaiming expired permits.
-- KEYS[1] the available count, KEYS[2] the timeout zset, KEYS[3] the wake-up channel,
-- KEYS[4] the configured total
-- Returns {available, acquired, total}; total is -1 when the semaphore was never set up.
local value = redis.call('get', KEYS[1])
local available = 0
if value then
  available = string.match(value, '^%-?%d+$') and tonumber(value)
  if not available then
    return redis.error_reply('WRONGTYPE the permit count is not an integer')
  end
end
local clock = redis.call('time')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
-- Reclaim the permits whose lease ended.
local expired = redis.call('zremrangebyscore', KEYS[2], '-inf', now)
if expired > 0 then
  available = redis.call('incrby', KEYS[1], expired)
  redis.call('publish', KEYS[3], available)
end
local acquired = redis.call('zcard', KEYS[2])
local total = redis.call('get', KEYS[4])
if total then
  total = string.match(total, '^%-?%d+$') and tonumber(total)
  if not total then
    return redis.error_reply('WRONGTYPE the permit total is not an integer')
  end
elseif value or acquired > 0 then
  total = available + acquired
else
  total = -1
end
return {available, acquired, total}
