-- keylatch read-write lock: change the lease of an owner's write hold, if it is still the
-- owner's (LockGuard::extend, set_lease, watchdog).
-- KEYS[1] the lock hash
-- ARGV[1] milliseconds, ARGV[2] owner id, ARGV[3] the owner's write field (<owner id>:write),
-- ARGV[4] '1': add to what is left, '0': set it
-- The hash's expiry is the write hold's lease, but never below the longest of the same
-- owner's own read holds (a writer that also reads, about to downgrade): those keep theirs.
-- Returns the lease left afterwards in ms (the hash's); -1 when the owner does not hold the
-- write lock; -2 when the hash has no expiry (it is not a lease this script may change).
if redis.call('type', KEYS[1]).ok ~= 'hash' then
  return -1
end
local got = redis.call('hmget', KEYS[1], 'mode', ARGV[3], ARGV[2])
if got[1] ~= 'write' or not got[2] then
  return -1
end
local left = redis.call('pttl', KEYS[1])
local ms = tonumber(ARGV[1])
if ARGV[4] == '1' then
  if left < 0 then
    return -2
  end
  ms = left + ms
end
local reads = tonumber(got[3]) or 0
if reads > 0 then
  local prefix = KEYS[1]
  if not string.find(prefix, '{', 1, true) then
    prefix = '{' .. prefix .. '}'
  end
  for j = 1, reads do
    local read = redis.call('pttl', prefix .. ':' .. ARGV[2] .. ':rwlock_timeout:' .. j)
    if read > ms then
      ms = read
    end
  end
end
redis.call('pexpire', KEYS[1], ms)
return ms
