-- keylatch fair lock: release one hold.
-- ARGV[1] owner id
-- Returns nil (not an owner: nothing changed), 0 (still held), 1 (released; the lock is
-- handed to the head of the queue, or the head is woken on its own channel: see hand_off).
local count = redis.call('hget', KEYS[1], ARGV[1])
if not count then
  return nil
end
if tonumber(count) > 1 then
  redis.call('hincrby', KEYS[1], ARGV[1], -1)
  return 0
end
redis.call('del', KEYS[1])
redis.call('hdel', KEYS[6], ARGV[1])
local head, deadline = evict(false)
if head then
  hand_off(head, deadline)
end
return 1
