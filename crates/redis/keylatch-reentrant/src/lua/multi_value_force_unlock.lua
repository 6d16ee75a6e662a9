-- keylatch multi-value lock: release the values whoever holds them (Redisson's forceUnlock).
-- KEYS[1] the group hash, KEYS[2] the wake-up channel; ARGV[1] the unlock message,
-- ARGV[2..] the fields
-- Returns how many values were held. Refuses (WRONGTYPE) a key that is not a hash.
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
  return 0
end
if kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE the group key holds a ' .. kind)
end
local removed = 0
for i = 2, #ARGV do
  local owner = redis.call('hget', KEYS[1], ARGV[i])
  if owner then
    redis.call('hdel', KEYS[1], ARGV[i], ARGV[i] .. ':' .. owner .. ':expire_time',
      ARGV[i] .. ':' .. owner .. ':lock_count')
    removed = removed + 1
  end
end
if removed > 0 then
  redis.call('publish', KEYS[2], ARGV[1])
end
return removed
