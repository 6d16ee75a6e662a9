-- keylatch delayed queue: a reliable take. Gives back what was not acknowledged in time, moves
-- what is due, then takes the next element (one given back first, else the destination list's
-- head) into the processing hash, visible again after the visibility timeout.
-- KEYS[1] the destination list, KEYS[2] the delay zset, KEYS[3] the delay list, KEYS[4] the
-- unreadable list, KEYS[5] the processing hash, KEYS[6] the deadlines zset, KEYS[7] the retry
-- list, KEYS[8] the dead-letter list
-- ARGV[1] the visibility timeout in ms, ARGV[2] the most deliveries, ARGV[3] the most elements
-- to move or give back, ARGV[4] this delivery's field (`<consumer>:<delivery>`)
-- Returns {1, delivery count, value} when an element was taken, {2, ms} when none is ready and
-- the next is due in ms, {3} when there is none (processing ones may come back).
local now = now_ms()
reclaim(now, tonumber(ARGV[2]), tonumber(ARGV[3]))
move_due(now, tonumber(ARGV[3]))
local count, value = 0, nil
local record = redis.call('lpop', KEYS[7])
if record then
  count, value = split_record(record)
else
  value = redis.call('lpop', KEYS[1])
end
if value then
  count = count + 1
  redis.call('hset', KEYS[5], ARGV[4], count .. ':' .. value)
  redis.call('zadd', KEYS[6], ms(now + tonumber(ARGV[1])), ARGV[4])
  return {1, count, value}
end
local waits = {}
local head = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if head[2] then
  waits[#waits + 1] = tonumber(head[2])
end
local back = redis.call('zrange', KEYS[6], 0, 0, 'withscores')
if back[2] then
  waits[#waits + 1] = tonumber(back[2])
end
if #waits > 0 then
  return {2, ms(math.max(0, math.min(unpack(waits)) - now))}
end
return {3}
