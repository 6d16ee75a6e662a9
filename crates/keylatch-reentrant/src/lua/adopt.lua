-- keylatch reentrant lock: take over a hold another process acquired (hand-over by owner id).
-- KEYS[1] the lock hash
-- ARGV[1] the lease in ms (the watchdog's, as a renewal sets it), ARGV[2] the owner's field
-- Returns the owner's hold count when it holds the lock (the lease set again), 0 when it does
-- not (nothing written).
local count = redis.call('hget', KEYS[1], ARGV[2])
if not count then
  return 0
end
redis.call('pexpire', KEYS[1], ARGV[1])
return tonumber(count)
