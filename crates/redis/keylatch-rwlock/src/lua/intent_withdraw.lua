-- keylatch read-write lock: a writer stops waiting (its wait timed out or was cancelled).
-- KEYS[1] the lock hash (not read: the call goes on the connection of the lock's name, the one
-- the write acquire that may have recorded the intent went on, so it never overtakes it),
-- KEYS[2] the writer-intent zset, KEYS[3] the wake-up channel; ARGV[1] the owner id
-- Returns 1 when the intent was there. When it was the last one, publishes '1' so the
-- readers that deferred to it retry at once.
if redis.call('zrem', KEYS[2], ARGV[1]) == 0 then
  return 0
end
if redis.call('exists', KEYS[2]) == 0 then
  redis.call('publish', KEYS[3], '1')
end
return 1
