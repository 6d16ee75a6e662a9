-- keylatch multi-value lock: the watchdog's batched renewal of an owner's values in groups.
-- KEYS[i] a group hash; ARGV[1] lease in ms; ARGV[i + 1] the owner id of KEYS[i]
-- Every <value>:<owner>:expire_time field of a value the owner still holds is set to now +
-- lease (server ms), and the key's expiry raised to the lease. One pass over the hash.
-- Returns one flag per key: 1 renewed, 0 the owner no longer holds any value there.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[1])
local renewed = {}
for i = 1, #KEYS do
  renewed[i] = 0
  local suffix = ':' .. ARGV[i + 1] .. ':expire_time'
  local fields = redis.pcall('hgetall', KEYS[i])
  if type(fields) == 'table' and not fields['err'] then
    for j = 1, #fields, 2 do
      local field = fields[j]
      if #field > #suffix and string.sub(field, -#suffix) == suffix then
        local value = string.sub(field, 1, #field - #suffix)
        if redis.call('hget', KEYS[i], value) == ARGV[i + 1] and tonumber(fields[j + 1]) >= now then
          redis.call('hset', KEYS[i], field, now + lease)
          renewed[i] = 1
        end
      end
    end
    if renewed[i] == 1 and redis.call('pttl', KEYS[i]) < lease then
      redis.call('pexpire', KEYS[i], lease)
    end
  end
end
return renewed
