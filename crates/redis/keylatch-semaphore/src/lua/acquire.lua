-- keylatch semaphore: take permits.
-- KEYS[1] the permit count, KEYS[2] this request's marker, KEYS[3..] markers of requests whose
-- replies were seen (deleted when permits are taken)
-- ARGV[1] permits wanted, ARGV[2] the marker's ttl in ms, ARGV[3] the count to set up when the
-- semaphore is missing ('0': none; its keys were lost to a restart or a flush)
-- Returns 1 when the permits were taken (the marker records it, so a lost reply can be undone),
-- 0 when too few are available or the request was already settled by its undo (nothing
-- changed). A count that is not an integer is refused with WRONGTYPE before anything is written.
if redis.call('exists', KEYS[2]) == 1 then
  return 0
end
local value = redis.call('get', KEYS[1])
local available = 0
if value then
  available = (#value <= 18 and string.match(value, '^%-?%d+$')) and tonumber(value)
  if not available then
    return redis.error_reply('WRONGTYPE the permit count is not an integer')
  end
end
if not value and ARGV[3] ~= '0' then
  available = tonumber(ARGV[3])
  redis.call('set', KEYS[1], available)
end
local wanted = tonumber(ARGV[1])
if available < wanted then
  return 0
end
redis.call('decrby', KEYS[1], wanted)
redis.call('set', KEYS[2], '1', 'px', ARGV[2])
if #KEYS >= 3 then
  redis.call('del', unpack(KEYS, 3))
end
return 1
