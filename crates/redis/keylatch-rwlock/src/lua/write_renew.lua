-- keylatch read-write lock: the watchdog's batched renewal of write holds.
-- KEYS[i] a lock hash; ARGV[1] lease in ms; ARGV[i + 1] the write field (<owner id>:write)
-- Returns one flag per key: 1 renewed, 0 the owner no longer holds the write lock.
-- The expiry is never shortened (the writer's own longer read holds keep theirs).
local renewed = {}
for i = 1, #KEYS do
  if redis.pcall('hexists', KEYS[i], ARGV[i + 1]) == 1 then
    if redis.call('pttl', KEYS[i]) < tonumber(ARGV[1]) then
      redis.call('pexpire', KEYS[i], ARGV[1])
    end
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
