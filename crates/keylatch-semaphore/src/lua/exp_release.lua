-- keylatch permit-expirable semaphore: release permits by id.
-- KEYS[1] the available count, KEYS[2] the timeout zset, KEYS[3] the wake-up channel
-- ARGV[1..] permit ids
-- Returns how many of the ids were held (and are released now; the new count is published).
-- An id that is unknown or whose lease already ended counts 0. Idempotent: releasing an id
-- twice releases it once. Expired permits are reclaimed first.
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
local released = 0
for i = 1, #ARGV do
  released = released + redis.call('zrem', KEYS[2], ARGV[i])
end
if released > 0 then
  available = redis.call('incrby', KEYS[1], released)
  redis.call('publish', KEYS[3], available)
end
return released
