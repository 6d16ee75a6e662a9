-- keylatch permit-expirable semaphore: add (or remove) permits, changing the total with them
-- (the total is available + held, as Redisson counts it).
-- KEYS[1] the available count, KEYS[2] the timeout zset, KEYS[3] the wake-up channel,
-- KEYS[4] the total of older keylatch versions (deleted), KEYS[5] this request's marker,
-- KEYS[6..] markers of requests whose replies were seen (deleted when the counts change)
-- ARGV[1] the change, ARGV[2] the marker's ttl in ms, ARGV[3] the largest total allowed
-- Returns 1 when applied (1 again, without applying anything, for a request already applied);
-- -1 when the total would exceed ARGV[3]; -2 when the available count would fall below zero.
if redis.call('exists', KEYS[5]) == 1 then
  return 1
end
local _, available = reclaim()
if not available then
  return redis.error_reply(NOT_A_COUNT)
end
local total = available + redis.call('zcard', KEYS[2])
local delta = tonumber(ARGV[1])
if delta > 0 and total + delta > tonumber(ARGV[3]) then
  return -1
end
if delta < 0 and available + delta < 0 then
  return -2
end
available = redis.call('incrby', KEYS[1], delta)
redis.call('del', KEYS[4])
if delta > 0 then
  redis.call('publish', KEYS[3], available)
end
redis.call('set', KEYS[5], '1', 'px', ARGV[2])
if #KEYS >= 6 then
  redis.call('del', unpack(KEYS, 6))
end
return 1
