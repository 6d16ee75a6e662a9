-- keylatch permit-expirable semaphore: release permits by id.
-- KEYS[1] the available count, KEYS[2] the timeout zset, KEYS[3] the wake-up channel
-- ARGV[1..] permit ids (hex)
-- Returns how many of the ids were held (and are released now; the new count is published).
-- An id that is unknown or whose lease already ended counts 0. Idempotent: releasing an id
-- twice releases it once. Expired permits are reclaimed first.
local _, available = reclaim()
if not available then
  return redis.error_reply(NOT_A_COUNT)
end
return give_back(available, 1)
