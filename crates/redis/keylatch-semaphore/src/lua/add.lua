-- keylatch semaphore: release permits, or add (or remove) permits.
-- KEYS[1] the permit count, KEYS[2] the wake-up channel, KEYS[3] this request's marker,
-- KEYS[4..] markers of requests whose replies were seen (deleted when the count changes)
-- ARGV[1] the change (negative removes permits), ARGV[2] the marker's ttl in ms, counted from
-- now (when the server applies the request, not when the client sent it), ARGV[3] the largest
-- count allowed, ARGV[4] '1' to apply only if the count's key exists (a release must not bring
-- back a deleted semaphore)
-- Returns 1 when applied (and publishes the new count when it grew); 1 again, without applying
-- anything, for a request already applied (so retries after a lost reply are idempotent: the
-- retry sets the marker's ttl again, so it lives ARGV[2] past the last attempt that arrived);
-- -1 when the count would exceed ARGV[3], -2 when it would fall below zero (nothing changed);
-- 0 when ARGV[4] asked for an existing count and there is none (nothing changed, no marker).
if redis.call('pexpire', KEYS[3], ARGV[2]) == 1 then
  return 1
end
if ARGV[4] == '1' and redis.call('exists', KEYS[1]) == 0 then
  return 0
end
local value = redis.call('get', KEYS[1])
local current = 0
if value then
  current = (#value <= 18 and string.match(value, '^%-?%d+$')) and tonumber(value)
  if not current then
    return redis.error_reply('WRONGTYPE the permit count is not an integer')
  end
end
local delta = tonumber(ARGV[1])
if delta > 0 and current + delta > tonumber(ARGV[3]) then
  return -1
end
if delta < 0 and current + delta < 0 then
  return -2
end
local updated = redis.call('incrby', KEYS[1], delta)
if delta > 0 then
  redis.call('publish', KEYS[2], updated)
end
redis.call('set', KEYS[3], '1', 'px', ARGV[2])
if #KEYS >= 4 then
  redis.call('del', unpack(KEYS, 4))
end
return 1
