-- keylatch permit-expirable semaphore: undo an acquire whose reply was lost.
-- KEYS[1] the available count, KEYS[2] the timeout zset, KEYS[3] the wake-up channel,
-- KEYS[4..] one tombstone key per id ({name}:req:<id>)
-- ARGV[1] the tombstones' ttl in ms, ARGV[2..] the acquire's permit ids
-- Releases the ids that are held (the acquire ran) and leaves a tombstone for each, so that
-- the acquire, if it arrives later, takes nothing. Idempotent. Returns how many were released.
-- Expired permits are reclaimed first.
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
for i = 2, #ARGV do
  released = released + redis.call('zrem', KEYS[2], ARGV[i])
  redis.call('set', KEYS[i + 2], '0', 'px', ARGV[1])
end
if released > 0 then
  available = redis.call('incrby', KEYS[1], released)
  redis.call('publish', KEYS[3], available)
end
return released
