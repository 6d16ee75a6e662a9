-- keylatch permit-expirable semaphore: set the permit count (and so the total) if never set.
-- KEYS[1] the available count, KEYS[2] the timeout zset, KEYS[3] the wake-up channel,
-- KEYS[4] the total of older keylatch versions (deleted), KEYS[5] this request's marker,
-- KEYS[6..] markers of requests whose replies were seen (deleted when the counts are set)
-- ARGV[1] the permit count, ARGV[2] the marker's ttl in ms, ARGV[3] the count's time to live in
-- ms ('0': none; Redisson's trySetPermits with a time to live)
-- Returns 1 when set (and publishes the count), 0 when the semaphore already exists; a
-- request already applied returns 1 again without applying anything.
if redis.call('exists', KEYS[5]) == 1 then
  return 1
end
local value = redis.call('get', KEYS[1])
if value and not (#value <= 18 and string.match(value, '^%-?%d+$')) then
  return redis.error_reply('WRONGTYPE the permit count is not an integer')
end
if value or redis.call('zcard', KEYS[2]) > 0 then
  return 0
end
if ARGV[3] ~= '0' then
  redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[3])
else
  redis.call('set', KEYS[1], ARGV[1])
end
redis.call('del', KEYS[4])
redis.call('publish', KEYS[3], ARGV[1])
redis.call('set', KEYS[5], '1', 'px', ARGV[2])
if #KEYS >= 6 then
  redis.call('del', unpack(KEYS, 6))
end
return 1
