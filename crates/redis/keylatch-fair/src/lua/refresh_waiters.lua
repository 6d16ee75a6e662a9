-- keylatch fair lock: the watchdog's batched refresh of live waiters (after queue_lib.lua).
-- KEYS[i] a fair lock's score zset (redisson_lock_timeout:...); ARGV[1] the waiter timeout in
-- ms; ARGV[i + 1] a keylatch waiter id queued there.
-- Moves each waiter's deadline to now + timeout (server clock) in the keylatch deadline zset,
-- and its score in Redisson's zset with it (see queue_lib.lua). The queue list and the
-- deadline zset are derived from the key: redisson_lock_queue:<rest> and <rest>:keylatch_waiters
-- (<rest> = {name}, or name when it holds its own hash tag), so in the same cluster slot; so
-- are the grant offers, <rest>:keylatch_grants.
-- Returns one flag per key: 1 refreshed, 0 the waiter is no longer queued, 2 it is no longer
-- queued because the lock was handed to it (not a loss: its wait is about to end).
local now = server_now()
local timeout = tonumber(ARGV[1])
local prefix = 'redisson_lock_timeout:'
local refreshed = {}
for i = 1, #KEYS do
  local id = ARGV[i + 1]
  refreshed[i] = 0
  if string.sub(KEYS[i], 1, #prefix) == prefix then
    local rest = string.sub(KEYS[i], #prefix + 1)
    local Q = 'redisson_lock_queue:' .. rest
    local H = rest .. ':keylatch_waiters'
    local G = rest .. ':keylatch_grants'
    local beat = redis.pcall('zscore', H, id)
    if type(beat) == 'string' and type(redis.pcall('zscore', KEYS[i], id)) == 'string' then
      place(Q, KEYS[i], H, G, id, now + timeout, timeout)
      refreshed[i] = 1
    else
      local mark = redis.pcall('hget', G, id)
      if type(mark) == 'string' and string.sub(mark, 1, 1) == '=' then
        refreshed[i] = 2
      end
    end
  end
end
return refreshed
