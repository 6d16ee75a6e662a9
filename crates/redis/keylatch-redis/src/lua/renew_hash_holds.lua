-- keylatch: the watchdog's batched renewal of holds kept as an owner's field of a lock hash
-- (the reentrant and the fair lock, Redisson's layout).
-- KEYS[i] a lock hash; ARGV[1] lease in ms; ARGV[i + 1] the owner id of KEYS[i]
-- Returns one flag per key: 1 renewed, 0 the owner no longer holds it.
local renewed = {}
for i = 1, #KEYS do
  local held = redis.pcall('hexists', KEYS[i], ARGV[i + 1])
  if held == 1 then
    redis.call('pexpire', KEYS[i], ARGV[1])
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
