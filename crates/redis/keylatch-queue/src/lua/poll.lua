-- keylatch delayed queue: move what is due, then take the destination list's head.
-- KEYS[1] the destination list, KEYS[2] the delay zset, KEYS[3] the delay list, KEYS[4] the
-- unreadable list, KEYS[5] this request's claim, KEYS[6..] claims of earlier requests whose
-- replies were seen (deleted)
-- ARGV[1] the claim's ttl in ms, ARGV[2] the most elements to move
-- The claim keeps a copy of the element taken ('1' .. value) for the request window, so that a
-- request whose reply never reached its caller is undone (the element goes back to the head);
-- an undone request leaves a tombstone ('0') and takes nothing if it arrives late.
-- Returns {1, value} when an element was taken, {2, ms} when none is ready and the next is due
-- in ms, {3} when the queue is empty, {0} when this request was already undone.
if #KEYS >= 6 then
  redis.call('del', unpack(KEYS, 6))
end
if redis.call('exists', KEYS[5]) == 1 then
  return {0}
end
local now = now_ms()
move_due(now, tonumber(ARGV[2]))
local v = redis.call('lpop', KEYS[1])
if v then
  redis.call('set', KEYS[5], '1' .. v, 'px', ARGV[1])
  return {1, v}
end
local head = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if head[2] then
  return {2, ms(math.max(0, tonumber(head[2]) - now))}
end
return {3}
