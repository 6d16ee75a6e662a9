-- keylatch fair lock: a wait ended without the lock (cancelled, timed out, failed): leave the
-- queue at once. The Redisson waiters chained on this waiter are chained on the one ahead of
-- it. If that (or an eviction) made another waiter head, wake it, so it inherits no delay
-- from the one that left.
-- ARGV[1] the waiter id
-- Returns 1 when the waiter was queued, 0 otherwise.
local queued = redis.call('zscore', KEYS[3], ARGV[1]) or redis.call('zscore', KEYS[5], ARGV[1])
leave_queue(ARGV[1])
local head = evict(true)
if head and head ~= before then
  wake(head)
end
if queued then
  return 1
end
return 0
