-- keylatch: change the lease of an owner's hold on a lock hash (Redisson's layout: one field per
-- owner), if it is still the owner's. For the reentrant-family and fair locks.
-- KEYS[1] the lock hash
-- ARGV[1] milliseconds, ARGV[2] owner id, ARGV[3] '1': add to what is left, '0': set it,
-- ARGV[4] '1': the holder metadata follows (clients with `Config::holder_metadata`)
-- Returns the lease left afterwards in ms; -1 when the owner does not hold the lock; -2 when
-- the key has no expiry (it is not a lease this script may change).
-- The holder metadata hash of a lock key (keylatch's `keylatch_meta:{name}`, in the lock's
-- slot): its lifetime follows the lock's. PEXPIRE of a missing key does nothing.
local function meta_key(name)
  if string.find(name, '{', 1, true) then
    return 'keylatch_meta:' .. name
  end
  return 'keylatch_meta:{' .. name .. '}'
end
if redis.call('type', KEYS[1]).ok ~= 'hash' or redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return -1
end
local ms = tonumber(ARGV[1])
if ARGV[3] == '1' then
  local left = redis.call('pttl', KEYS[1])
  if left < 0 then
    return -2
  end
  ms = left + ms
end
redis.call('pexpire', KEYS[1], ms)
if ARGV[4] == '1' then
  redis.call('pexpire', meta_key(KEYS[1]), ms)
end
return ms
