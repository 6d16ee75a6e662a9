-- keylatch permit-expirable semaphore: set a held permit's lease anew, from now.
-- KEYS[1] the available count, KEYS[2] the timeout zset, KEYS[3] the wake-up channel
-- ARGV[1] the permit id, ARGV[2] the new lease in ms
-- Returns 1 when updated, 0 when the id is unknown or its lease already ended. Expired permits
-- are reclaimed first.
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
if redis.call('zscore', KEYS[2], ARGV[1]) then
  redis.call('zadd', KEYS[2], 'XX', now + tonumber(ARGV[2]), ARGV[1])
  return 1
end
return 0
