-- keylatch multi-value lock: whether any of the values is held (its lease not ended).
-- KEYS[1] the group hash; ARGV[1..] the fields
-- Returns 1 or 0. Refuses (WRONGTYPE) a key that is not a hash.
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
  return 0
end
if kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE the group key holds a ' .. kind)
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 1, #ARGV do
  local owner = redis.call('hget', KEYS[1], ARGV[i])
  if owner then
    local expire = tonumber(redis.call('hget', KEYS[1], ARGV[i] .. ':' .. owner .. ':expire_time'))
    if expire and expire >= now then
      return 1
    end
  end
end
return 0
