-- keylatch delayed queue: {delayed, due now, ready, the oldest overdue element's due time or
-- false, the server's now, being processed, waiting for another delivery, dead letters}.
-- KEYS[1] the destination list, KEYS[2] the delay zset, KEYS[3] the processing hash, KEYS[4]
-- the retry list, KEYS[5] the dead-letter list
local now = now_ms()
local due = redis.call('zcount', KEYS[2], 0, now)
local oldest = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
local overdue = false
if oldest[2] and tonumber(oldest[2]) <= now then
  overdue = ms(tonumber(oldest[2]))
end
return {redis.call('zcard', KEYS[2]), due, redis.call('llen', KEYS[1]), overdue, ms(now),
  redis.call('hlen', KEYS[3]), redis.call('llen', KEYS[4]), redis.call('llen', KEYS[5])}
