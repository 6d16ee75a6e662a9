-- keylatch semaphore: set the permit count if it was never set.
-- KEYS[1] the permit count, KEYS[2] the wake-up channel, KEYS[3] this request's marker,
-- KEYS[4..] markers of requests whose replies were seen (deleted when the count is set)
-- ARGV[1] the permit count, ARGV[2] the marker's ttl in ms, ARGV[3] the count's time to live in
-- ms ('0': none; Redisson's trySetPermits with a time to live)
-- Returns 1 when set (and publishes the count), 0 when a count already exists; a request
-- already applied returns 1 again without applying anything. A value that is not an integer
-- is refused with WRONGTYPE.
if redis.call('exists', KEYS[3]) == 1 then
  return 1
end
local value = redis.call('get', KEYS[1])
if value then
  if not (#value <= 18 and string.match(value, '^%-?%d+$')) then
    return redis.error_reply('WRONGTYPE the permit count is not an integer')
  end
  return 0
end
if ARGV[3] ~= '0' then
  redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[3])
else
  redis.call('set', KEYS[1], ARGV[1])
end
redis.call('publish', KEYS[2], ARGV[1])
redis.call('set', KEYS[3], '1', 'px', ARGV[2])
if #KEYS >= 4 then
  redis.call('del', unpack(KEYS, 4))
end
return 1
