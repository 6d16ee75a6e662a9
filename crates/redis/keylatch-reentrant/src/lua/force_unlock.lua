-- keylatch reentrant lock: release whoever holds it.
-- KEYS[1] the lock hash, KEYS[2] the wake-up channel, KEYS[3] the holder metadata hash;
-- ARGV[1] the unlock message ('0'; '' for
-- the spin lock, which publishes nothing)
-- Returns 1 when it was held, 0 when it was free. Refuses (WRONGTYPE) a key that is not a hash.
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
  return 0
end
if kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE the lock key holds a ' .. kind)
end
redis.call('del', KEYS[1], KEYS[3])
if ARGV[1] ~= '' then
  redis.call('publish', KEYS[2], ARGV[1])
end
return 1
