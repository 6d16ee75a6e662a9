-- keylatch multi-value lock: take every value of a group, or none (Redisson's
-- RedissonFasterMultiLock layout), or re-enter the ones this owner holds.
-- KEYS[1] the group hash
-- ARGV[1] lease in ms, ARGV[2] owner id, ARGV[3..] one field per value
-- Hash fields: <value> -> owner, <value>:<owner>:expire_time -> server ms, <value>:<owner>:lock_count.
-- Returns nil when every value was taken, otherwise the ms until the latest other holder's
-- lease ends (nothing written). A key of another type raises WRONGTYPE before any write.
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE the group key holds a ' .. kind)
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[1])
local owner = ARGV[2]
local wait = -1
for i = 3, #ARGV do
  local other = redis.call('hget', KEYS[1], ARGV[i])
  if other and other ~= owner then
    local expire = tonumber(redis.call('hget', KEYS[1], ARGV[i] .. ':' .. other .. ':expire_time'))
    if expire and expire > now and expire - now > wait then
      wait = expire - now
    end
  end
end
if wait >= 0 then
  return wait
end
for i = 3, #ARGV do
  local field = ARGV[i]
  local other = redis.call('hget', KEYS[1], field)
  if other and other ~= owner then
    -- A holder whose lease ended: its fields go.
    redis.call('hdel', KEYS[1], field .. ':' .. other .. ':expire_time',
      field .. ':' .. other .. ':lock_count')
  end
  redis.call('hset', KEYS[1], field, owner)
  local expire_field = field .. ':' .. owner .. ':expire_time'
  local expire = tonumber(redis.call('hget', KEYS[1], expire_field))
  if not expire or expire < now + lease then
    redis.call('hset', KEYS[1], expire_field, now + lease)
  end
  redis.call('hincrby', KEYS[1], field .. ':' .. owner .. ':lock_count', 1)
end
if redis.call('pttl', KEYS[1]) < lease then
  redis.call('pexpire', KEYS[1], lease)
end
return nil
