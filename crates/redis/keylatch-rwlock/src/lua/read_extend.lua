-- keylatch read-write lock: change the lease of an owner's read holds, if they are still the
-- owner's (LockGuard::extend, set_lease, watchdog).
-- KEYS[1] the lock hash
-- ARGV[1] milliseconds, ARGV[2] owner id, ARGV[3] '1': add to what is left, '0': set it
-- Every per-hold key of the owner ({name}:<owner id>:rwlock_timeout:<j>) that still exists
-- gets the new lease; other readers' keys are left alone. Then the hash's expiry is made
-- right: in read mode the longest remaining read hold of any reader (as a read release
-- computes it, so a shortened lease really ends the hold while other readers keep theirs);
-- in write mode (the writer's own reads) it is only ever lengthened, never shortened.
-- Returns the least lease left among the owner's keys in ms; -1 when the owner holds no read
-- hold (or all its keys are gone); -2 when one of them has no expiry and ARGV[3] is '1'.
-- Every check comes before the first write.
if redis.call('type', KEYS[1]).ok ~= 'hash' then
  return -1
end
local got = redis.call('hmget', KEYS[1], 'mode', ARGV[2])
local mode = got[1]
local count = tonumber(got[2])
if not count or (mode ~= 'read' and mode ~= 'write') then
  return -1
end
local prefix = KEYS[1]
if not string.find(prefix, '{', 1, true) then
  prefix = '{' .. prefix .. '}'
end
local keys = {}
local lefts = {}
for j = 1, count do
  local key = prefix .. ':' .. ARGV[2] .. ':rwlock_timeout:' .. j
  local left = redis.call('pttl', key)
  if left ~= -2 then
    if left == -1 and ARGV[3] == '1' then
      return -2
    end
    keys[#keys + 1] = key
    lefts[#lefts + 1] = left
  end
end
if #keys == 0 then
  return -1
end
local least = nil
for i = 1, #keys do
  local ms = tonumber(ARGV[1])
  if ARGV[3] == '1' then
    ms = lefts[i] + ms
  end
  redis.call('pexpire', keys[i], ms)
  if not least or ms < least then
    least = ms
  end
end
local ttl = redis.call('pttl', KEYS[1])
if ttl == -1 then
  return least
end
local longest = 0
if mode == 'write' then
  longest = ttl
end
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields, 2 do
  local field = fields[i]
  if field ~= 'mode' and string.sub(field, -6) ~= ':write' then
    local n = tonumber(fields[i + 1]) or 0
    for j = 1, n do
      local left = redis.call('pttl', prefix .. ':' .. field .. ':rwlock_timeout:' .. j)
      if left > longest then
        longest = left
      end
    end
  end
end
if longest ~= ttl then
  redis.call('pexpire', KEYS[1], longest)
end
return least
