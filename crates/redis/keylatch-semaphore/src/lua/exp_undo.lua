-- keylatch permit-expirable semaphore: undo an acquire whose reply was lost.
-- KEYS[1] the available count, KEYS[2] the timeout zset, KEYS[3] the wake-up channel,
-- KEYS[4..] one tombstone key per id ({name}:req:<id>)
-- ARGV[1] the tombstones' ttl in ms, ARGV[2..] the acquire's permit ids (hex)
-- Releases the ids that are held (the acquire ran) and leaves a tombstone for each, so that
-- the acquire, if it arrives later, takes nothing. Idempotent. Returns how many were released.
-- Expired permits are reclaimed first.
local _, available = reclaim()
if not available then
  return redis.error_reply(NOT_A_COUNT)
end
local released = 0
for i = 2, #ARGV do
  released = released + redis.call('zrem', KEYS[2], raw_id(ARGV[i]))
  redis.call('set', KEYS[i + 2], '0', 'px', ARGV[1])
end
if released > 0 then
  available = redis.call('incrby', KEYS[1], released)
  redis.call('publish', KEYS[3], available)
end
return released
