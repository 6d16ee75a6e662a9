-- keylatch delayed queue: offer an element (Redisson's RDelayedQueue.offer, same effects).
-- KEYS[1] the destination list, KEYS[2] the delay zset, KEYS[3] the delay list, KEYS[4] the
-- channel
-- ARGV[1] the delay in ms (ARGV[4] = 'd': due at the server's now + delay) or the due time in ms
-- since the epoch (ARGV[4] = 'a'), ARGV[2] the random id (8 bytes), ARGV[3] the encoded value,
-- ARGV[5] 'lean' to leave the element out of the delay list (keylatch's lean layout: moving it
-- then costs no scan of that list)
-- Returns the due time in ms.
local due
if ARGV[4] == 'd' then
  due = now_ms() + tonumber(ARGV[1])
else
  due = tonumber(ARGV[1])
end
local value = struct.pack('Bc0Lc0', string.len(ARGV[2]), ARGV[2], string.len(ARGV[3]), ARGV[3])
redis.call('zadd', KEYS[2], ms(due), value)
if ARGV[5] ~= 'lean' then
  redis.call('rpush', KEYS[3], value)
end
-- A new head: every transfer task (Redisson's) and waiting consumer learns its due time.
local v = redis.call('zrange', KEYS[2], 0, 0)
if v[1] == value then
  redis.call('publish', KEYS[4], ms(due))
end
return ms(due)
