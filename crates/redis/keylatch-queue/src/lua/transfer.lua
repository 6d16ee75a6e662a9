-- keylatch delayed queue: the transfer (Redisson's, with the server's clock).
-- KEYS[1] the destination list, KEYS[2] the delay zset, KEYS[3] the delay list, KEYS[4] the
-- unreadable list
-- ARGV[1] the most elements to move
-- Returns {moved, due time of the next element in ms since the epoch or false, ms until it is
-- due by the server's clock or false}.
local now = now_ms()
local moved = move_due(now, tonumber(ARGV[1]))
local head = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if head[2] then
  local due = tonumber(head[2])
  return {moved, ms(due), ms(math.max(0, due - now))}
end
return {moved, false, false}
