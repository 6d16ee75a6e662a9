-- keylatch reentrant lock: undo a request whose outcome is unknown.
-- Releases one hold of the owner only if its hold count is exactly the expected one.
-- KEYS[1] the lock hash, KEYS[2] the wake-up channel, KEYS[3] the holder metadata hash (deleted
-- with the lock)
-- ARGV[1] the unlock message ('0'; '' for
-- the spin lock, which publishes nothing), ARGV[2] owner id, ARGV[3] expected hold count
-- Returns 1 when a hold was released, 0 otherwise.
local count = redis.call('hget', KEYS[1], ARGV[2])
if not count or tonumber(count) ~= tonumber(ARGV[3]) then
  return 0
end
if tonumber(count) > 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], -1)
  return 1
end
redis.call('del', KEYS[1], KEYS[3])
if ARGV[1] ~= '' then
  redis.call('publish', KEYS[2], ARGV[1])
end
return 1
