-- keylatch delayed queue: the transfer (Redisson's, with the server's clock).
-- KEYS[1] the destination list, KEYS[2] the delay zset, KEYS[3] the delay list, KEYS[4] the
-- unreadable list
-- ARGV[1] the most elements to move
-- Returns {moved, due time of the next element in ms since the epoch, or false}.
local moved = move_due(now_ms(), tonumber(ARGV[1]))
local head = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if head[2] then
  return {moved, ms(tonumber(head[2]))}
end
return {moved, false}
