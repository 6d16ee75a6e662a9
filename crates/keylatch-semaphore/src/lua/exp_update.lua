-- keylatch permit-expirable semaphore: set a held permit's lease anew, from now.
-- KEYS[1] the available count, KEYS[2] the timeout zset, KEYS[3] the wake-up channel
-- ARGV[1] the permit id (hex), ARGV[2] the new lease in ms
-- Returns 1 when updated, 0 when the id is unknown or its lease already ended. Expired permits
-- are reclaimed first.
local _, available, now = reclaim()
if not available then
  return redis.error_reply(NOT_A_COUNT)
end
local id = raw_id(ARGV[1])
if redis.call('zscore', KEYS[2], id) then
  redis.call('zadd', KEYS[2], 'XX', now + tonumber(ARGV[2]), id)
  return 1
end
return 0
