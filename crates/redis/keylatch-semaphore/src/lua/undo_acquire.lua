-- keylatch semaphore: settle an acquire whose reply was lost as "not acquired".
-- KEYS[1] the permit count, KEYS[2] the wake-up channel, KEYS[3] the acquire's marker
-- ARGV[1] permits of that acquire, ARGV[2] the marker's ttl in ms
-- If the acquire ran (marker '1') its permits are given back; either way the marker becomes a
-- tombstone ('0'), so an acquire still on its way takes nothing when it arrives. Idempotent.
-- Returns 1 when permits were given back, 0 otherwise.
local state = redis.call('get', KEYS[3])
redis.call('set', KEYS[3], '0', 'px', ARGV[2])
if state == '1' then
  local value = redis.call('incrby', KEYS[1], ARGV[1])
  redis.call('publish', KEYS[2], value)
  return 1
end
return 0
