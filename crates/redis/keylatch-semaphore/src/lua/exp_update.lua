-- keylatch permit-expirable semaphore: change a held permit's lease (update_lease, adopt, and
-- a Permit's extend, set_lease and watchdog).
-- KEYS[1] the available count, KEYS[2] the timeout zset, KEYS[3] the wake-up channel
-- ARGV[1] the permit id (hex), ARGV[2] milliseconds, ARGV[3] '1': add them to what is left of
-- the lease; otherwise (or absent): the lease is set to them, from now (server clock)
-- Returns the lease left afterwards in ms; -1 when the id is unknown or its lease already
-- ended. Expired permits are reclaimed first.
local _, available, now = reclaim()
if not available then
  return redis.error_reply(NOT_A_COUNT)
end
local id = raw_id(ARGV[1])
local score = redis.call('zscore', KEYS[2], id)
if not score then
  return -1
end
local expiry = now + tonumber(ARGV[2])
if ARGV[3] == '1' then
  expiry = tonumber(score) + tonumber(ARGV[2])
end
redis.call('zadd', KEYS[2], 'XX', expiry, id)
return expiry - now
