-- keylatch fair lock: the watchdog's batched refresh of live waiters' deadlines.
-- KEYS[i] a fair lock's deadline zset (redisson_lock_timeout:...); ARGV[1] the waiter timeout in
-- ms; ARGV[i + 1] a waiter id queued there.
-- Moves each waiter's deadline to now + timeout (server clock) and keeps the zset and its queue
-- list alive at least that long. The queue is redisson_lock_queue:... with the same suffix, so
-- in the same cluster slot (same hash tag).
-- Returns one flag per key: 1 refreshed, 0 the waiter is no longer queued.
local clock = redis.call('time')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local timeout = tonumber(ARGV[1])
local prefix = 'redisson_lock_timeout'
local refreshed = {}
for i = 1, #KEYS do
  local score = redis.pcall('zscore', KEYS[i], ARGV[i + 1])
  if type(score) == 'string' then
    redis.call('zadd', KEYS[i], 'XX', now + timeout, ARGV[i + 1])
    local keys = {KEYS[i]}
    if string.sub(KEYS[i], 1, #prefix) == prefix then
      keys[2] = 'redisson_lock_queue' .. string.sub(KEYS[i], #prefix + 1)
    end
    for _, key in ipairs(keys) do
      local ttl = redis.call('pttl', key)
      if ttl ~= -2 and ttl < timeout then
        redis.call('pexpire', key, timeout)
      end
    end
    refreshed[i] = 1
  else
    refreshed[i] = 0
  end
end
return refreshed
