-- keylatch: set or clear the time to live of every key of one object (Redisson's `expire` and
-- `clearExpire` on an object made of several keys).
-- KEYS the object's keys (one hash slot)
-- ARGV[1] the time to live in ms, or 0 to clear it
-- Returns 1 when at least one key changed (got the time to live; had one, now cleared), else 0.
local changed = 0
for _, key in ipairs(KEYS) do
  local done
  if ARGV[1] == '0' then
    done = redis.call('persist', key)
  else
    done = redis.call('pexpire', key, ARGV[1])
  end
  if done == 1 then
    changed = 1
  end
end
return changed
