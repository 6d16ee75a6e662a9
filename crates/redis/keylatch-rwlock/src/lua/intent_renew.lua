-- keylatch read-write lock: the watchdog's refresh of waiting writers' intents.
-- KEYS[i] a writer-intent zset ({name}:write_intent); ARGV[1] the intent timeout in ms;
-- ARGV[i + 1] the waiting writer's owner id
-- Moves the writer's deadline to now + timeout if its intent is still recorded.
-- Returns one flag per key: 1 refreshed, 0 the intent is gone (acquired, withdrawn, expired).
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local renewed = {}
for i = 1, #KEYS do
  local score = redis.pcall('zscore', KEYS[i], ARGV[i + 1])
  if type(score) == 'string' then
    redis.call('zadd', KEYS[i], 'XX', now + tonumber(ARGV[1]), ARGV[i + 1])
    if redis.call('pttl', KEYS[i]) < tonumber(ARGV[1]) then
      redis.call('pexpire', KEYS[i], ARGV[1])
    end
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
