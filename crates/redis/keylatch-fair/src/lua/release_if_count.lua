-- keylatch fair lock: undo a request whose outcome is unknown.
-- Releases one hold of the owner only if its hold count is exactly the expected one.
-- ARGV[1] owner id, ARGV[2] expected hold count, ARGV[3] '1' to spare a hold handed to the
-- owner on release and not taken yet (the grant came after the request being undone: the
-- waiter takes it, or its leave releases it)
-- Returns 1 when a hold was released, 0 otherwise.
if ARGV[3] == '1' and granted(ARGV[1]) then
  return 0
end
local count = redis.call('hget', KEYS[1], ARGV[1])
if not count or tonumber(count) ~= tonumber(ARGV[2]) then
  return 0
end
if tonumber(count) > 1 then
  redis.call('hincrby', KEYS[1], ARGV[1], -1)
  return 1
end
redis.call('del', KEYS[1])
redis.call('hdel', KEYS[6], ARGV[1])
local head, deadline = evict(false)
if head then
  hand_off(head, deadline)
end
return 1
