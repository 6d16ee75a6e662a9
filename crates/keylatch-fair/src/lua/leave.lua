-- keylatch fair lock: a wait ended without the lock (cancelled, timed out, failed): leave the
-- queue at once. If that (or an eviction) made another waiter head, wake it, so it inherits no
-- delay from the one that left.
-- ARGV[1] the waiter id
-- Returns 1 when the waiter was queued, 0 otherwise.
local removed = redis.call('zrem', KEYS[3], ARGV[1])
local unlisted = redis.call('lrem', KEYS[2], 0, ARGV[1])
local head = evict(removed + unlisted > 0)
if head and head ~= before then
  wake(head)
end
return removed
