-- keylatch: the next fencing token of a counter, prepended to the scripts that issue tokens.
-- A token is never below the server clock in microseconds, so a counter lost to a restart
-- without persistence, a failover or a FLUSHALL starts again above every token issued before
-- (a counter advances by one per acquisition, far slower than the clock).
local function next_token(key)
  local clock = redis.call('time')
  local floor = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
  local current = tonumber(redis.call('get', key) or '0')
  if current < floor then
    redis.call('set', key, string.format('%d', floor))
  end
  return redis.call('incr', key)
end
