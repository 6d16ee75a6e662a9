-- keylatch multi-value lock: release one hold of every value of an owner, all or none.
-- KEYS[1] the group hash, KEYS[2] the wake-up channel
-- ARGV[1] the unlock message, ARGV[2] owner id, ARGV[3] the expected hold count ('' for any:
-- a release; a number: the undo of a request whose outcome is unknown), ARGV[4..] the fields
-- Returns nil when the owner does not hold every value (or, for an undo, the count differs):
-- nothing changed; 0 still held; 1 released, message published.
-- A value counts as held while its expire_time (server ms) has not passed, as in Redisson.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local owner = ARGV[2]
for i = 4, #ARGV do
  if redis.call('hget', KEYS[1], ARGV[i]) ~= owner then
    return nil
  end
  local prefix = ARGV[i] .. ':' .. owner
  local expire = tonumber(redis.call('hget', KEYS[1], prefix .. ':expire_time'))
  local count = tonumber(redis.call('hget', KEYS[1], prefix .. ':lock_count'))
  if not expire or expire < now or not count then
    return nil
  end
  if ARGV[3] ~= '' and count ~= tonumber(ARGV[3]) then
    return nil
  end
end
local freed = 0
for i = 4, #ARGV do
  local prefix = ARGV[i] .. ':' .. owner
  if redis.call('hincrby', KEYS[1], prefix .. ':lock_count', -1) <= 0 then
    redis.call('hdel', KEYS[1], ARGV[i], prefix .. ':expire_time', prefix .. ':lock_count')
    freed = 1
  end
end
if freed == 1 then
  redis.call('publish', KEYS[2], ARGV[1])
end
return freed
