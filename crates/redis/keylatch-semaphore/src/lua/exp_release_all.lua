-- keylatch permit-expirable semaphore: release permits by id, all or none (Redisson's
-- `release(ids)`).
-- KEYS[1] the available count, KEYS[2] the timeout zset, KEYS[3] the wake-up channel
-- ARGV[1..] permit ids (hex)
-- Returns {released} when every id was held (all are released now; the new count published),
-- or {0, i, j, ...}: the positions in ARGV of the ids that are unknown or whose lease ended
-- (nothing released). Expired permits are reclaimed first.
local _, available = reclaim()
if not available then
  return redis.error_reply(NOT_A_COUNT)
end
local unknown = {0}
for i = 1, #ARGV do
  if not redis.call('zscore', KEYS[2], raw_id(ARGV[i])) then
    unknown[#unknown + 1] = i
  end
end
if #unknown > 1 then
  return unknown
end
return {give_back(available, 1)}
