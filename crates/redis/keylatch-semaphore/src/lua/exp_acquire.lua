-- keylatch permit-expirable semaphore: take permits, each under its own id and lease.
-- KEYS[1] the available count, KEYS[2] the timeout zset (permit id -> expiry, ms of the
-- server clock), KEYS[3] the wake-up channel, KEYS[4] the total of older keylatch versions
-- (not read), KEYS[5..] one tombstone key per id ({name}:req:<id>, written by the undo of a
-- request whose reply was lost)
-- ARGV[1] the lease in ms, ARGV[2] the count to set up when the semaphore is missing ('0': none;
-- its keys were lost to a restart or a flush), ARGV[3..] one new permit id per permit wanted
-- (hex; stored as bytes)
-- Returns nil when acquired (Redisson's convention); -2 when more permits are wanted than the
-- semaphore has in all, available + held as Redisson counts it (nothing changed); otherwise the ms until the earliest lease ends (it is reclaimed a ms after its expiry), or
-- -1 when no lease is running (also, changing nothing, when this request was already undone).
-- Expired permits are reclaimed first.
for i = 5, #KEYS do
  if redis.call('exists', KEYS[i]) == 1 then
    return -1
  end
end
local value, available, now = reclaim()
if not available then
  return redis.error_reply(NOT_A_COUNT)
end
if not value and ARGV[2] ~= '0' and redis.call('zcard', KEYS[2]) == 0 then
  value = ARGV[2]
  available = tonumber(value)
  redis.call('set', KEYS[1], value)
end
local wanted = #ARGV - 2
if value and wanted > available + redis.call('zcard', KEYS[2]) then
  return -2
end
if available >= wanted then
  redis.call('decrby', KEYS[1], wanted)
  local expiry = now + tonumber(ARGV[1])
  for i = 3, #ARGV do
    redis.call('zadd', KEYS[2], expiry, raw_id(ARGV[i]))
  end
  return nil
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
if first[2] then
  return math.max(tonumber(first[2]) - now + 1, 1)
end
return -1
