-- keylatch read-write lock: the watchdog's batched renewal of read holds.
-- KEYS[i] a lock hash; ARGV[1] lease in ms; ARGV[i + 1] the owner id whose holds to renew
-- Renews only that owner's per-hold keys (never another reader's: a crashed reader's holds
-- expire on time), then keeps the hash alive at least as long.
-- Returns one flag per key: 1 renewed, 0 the owner holds nothing there any more.
local renewed = {}
for i = 1, #KEYS do
  renewed[i] = 0
  local count = redis.pcall('hget', KEYS[i], ARGV[i + 1])
  if type(count) == 'string' then
    local prefix = KEYS[i]
    if not string.find(prefix, '{', 1, true) then
      prefix = '{' .. prefix .. '}'
    end
    for j = 1, tonumber(count) do
      if redis.call('pexpire', prefix .. ':' .. ARGV[i + 1] .. ':rwlock_timeout:' .. j, ARGV[1]) == 1 then
        renewed[i] = 1
      end
    end
    if renewed[i] == 1 and redis.call('pttl', KEYS[i]) < tonumber(ARGV[1]) then
      redis.call('pexpire', KEYS[i], ARGV[1])
    end
  end
end
return renewed
