-- keylatch permit-expirable semaphore: the time left on one permit's lease.
-- KEYS[1] the available count, KEYS[2] the timeout zset, KEYS[3] the wake-up channel
-- ARGV[1] the permit id
-- Returns the ms left (server clock), or -1 when the id is unknown or its lease already ended.
-- Expired permits are reclaimed first.
local _, available, now = reclaim()
if not available then
  return redis.error_reply(NOT_A_COUNT)
end
local expiry = redis.call('zscore', KEYS[2], raw_id(ARGV[1]))
if not expiry then
  return -1
end
return math.max(tonumber(expiry) - now, 0)
