-- keylatch fair lock: read the queue (changes nothing).
-- KEYS[1] the queue list, KEYS[2] Redisson's waiter scores, KEYS[3] keylatch waiters' deadlines
-- Returns {server time in ms, id 1, deadline 1, id 2, deadline 2, ...} in queue order: a
-- keylatch waiter's liveness deadline, a Redisson waiter's score; '-1' for an id without one.
local clock = redis.call('time')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local out = {now}
for _, id in ipairs(redis.call('lrange', KEYS[1], 0, -1)) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('zscore', KEYS[3], id) or redis.call('zscore', KEYS[2], id) or '-1'
end
return out
