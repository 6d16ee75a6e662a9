-- keylatch semaphore: take every available permit.
-- KEYS[1] the permit count, KEYS[2] this request's marker, KEYS[3..] markers of requests whose
-- replies were seen (deleted)
-- ARGV[1] the marker's ttl in ms
-- Returns how many permits were taken (the marker records it: a request already applied
-- returns the same number again without taking anything).
local done = redis.call('get', KEYS[2])
if done then
  return tonumber(done)
end
local value = redis.call('get', KEYS[1])
local drained = 0
if value then
  local current = (#value <= 18 and string.match(value, '^%-?%d+$')) and tonumber(value)
  if not current then
    return redis.error_reply('WRONGTYPE the permit count is not an integer')
  end
  if current > 0 then
    redis.call('decrby', KEYS[1], current)
    drained = current
  end
end
redis.call('set', KEYS[2], drained, 'px', ARGV[1])
if #KEYS >= 3 then
  redis.call('del', unpack(KEYS, 3))
end
return drained
