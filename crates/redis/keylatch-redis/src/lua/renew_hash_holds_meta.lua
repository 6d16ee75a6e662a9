-- keylatch: the watchdog's batched renewal of holds kept as an owner's field of a lock hash
-- (the reentrant and the fair lock, Redisson's layout).
-- KEYS[i] a lock hash; ARGV[1] lease in ms; ARGV[i + 1] the owner id of KEYS[i]
-- Returns one flag per key: 1 renewed, 0 the owner no longer holds it.
-- This one also renews each lock's holder metadata (clients with `Config::holder_metadata`):
-- those clients' ACLs must allow `keylatch_meta:*`.
-- The holder metadata hash of a lock key (keylatch's `keylatch_meta:{name}`, in the lock's
-- slot): its lifetime follows the lock's. PEXPIRE of a missing key does nothing.
local function meta_key(name)
  if string.find(name, '{', 1, true) then
    return 'keylatch_meta:' .. name
  end
  return 'keylatch_meta:{' .. name .. '}'
end
local renewed = {}
for i = 1, #KEYS do
  local held = redis.pcall('hexists', KEYS[i], ARGV[i + 1])
  if held == 1 then
    redis.call('pexpire', KEYS[i], ARGV[1])
    redis.call('pexpire', meta_key(KEYS[i]), ARGV[1])
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
