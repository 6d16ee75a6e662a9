-- keylatch delayed queue: {delayed, due now, ready, the oldest overdue element's due time or
-- false, the server's now}. KEYS[1] the destination list, KEYS[2] the delay zset
local now = now_ms()
local due = redis.call('zcount', KEYS[2], 0, now)
local oldest = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
local overdue = false
if oldest[2] and tonumber(oldest[2]) <= now then
  overdue = ms(tonumber(oldest[2]))
end
return {redis.call('zcard', KEYS[2]), due, redis.call('llen', KEYS[1]), overdue, ms(now)}
