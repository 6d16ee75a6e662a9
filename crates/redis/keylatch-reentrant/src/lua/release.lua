-- keylatch reentrant lock: release one hold.
-- KEYS[1] the lock hash, KEYS[2] the wake-up channel, KEYS[3] the holder metadata hash (deleted
-- with the lock)
-- ARGV[1] the unlock message ('0'; '' for
-- the spin lock, which publishes nothing), ARGV[2] owner id
-- Returns nil (not an owner: nothing changed), 0 (still held), 1 (released, message published).
-- A partial release keeps the key's expiry: the holds that remain keep the lease they had.
local count = redis.call('hget', KEYS[1], ARGV[2])
if not count then
  return nil
end
if tonumber(count) > 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], -1)
  return 0
end
redis.call('del', KEYS[1], KEYS[3])
if ARGV[1] ~= '' then
  redis.call('publish', KEYS[2], ARGV[1])
end
return 1
