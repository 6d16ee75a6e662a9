-- keylatch fair lock: a wait ended without the lock (cancelled, timed out, failed): leave the
-- queue at once. The Redisson waiters chained on this waiter are chained on the one ahead of
-- it. If that (or an eviction) made another waiter head, wake it, so it inherits no delay
-- from the one that left.
-- A hold handed to the waiter on release that it never took (its wait ended first) is
-- released, and the lock handed on.
-- ARGV[1] the waiter id
-- Returns 1 when the waiter was queued, 0 otherwise.
local id = ARGV[1]
local queued = redis.call('zscore', KEYS[3], id) or redis.call('zscore', KEYS[5], id)
local released = false
if granted(id) and redis.call('hget', KEYS[1], id) == '1' then
  redis.call('del', KEYS[1])
  released = true
end
leave_queue(id)
local head, deadline = evict(true)
if head and released then
  hand_off(head, deadline)
elseif head and head ~= before then
  wake(head)
end
if queued then
  return 1
end
return 0
