-- keylatch permit-expirable semaphore: the watchdog's batched renewal of held permits.
-- KEYS[i] a timeout zset; ARGV[1] the lease in ms; ARGV[i + 1] the permit id in KEYS[i], in hex
-- (stored as the bytes it stands for, as Redisson stores it)
-- Returns one flag per key: 1 renewed (its expiry is now + lease, server clock), 0 the permit
-- is gone or its lease already ended (it is left for the next script to reclaim).
local clock = redis.call('time')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local expiry = now + tonumber(ARGV[1])
local renewed = {}
for i = 1, #KEYS do
  local id = string.gsub(ARGV[i + 1], '..', function(pair)
    return string.char(tonumber(pair, 16))
  end)
  local score = redis.pcall('zscore', KEYS[i], id)
  if type(score) == 'string' and tonumber(score) > now then
    redis.call('zadd', KEYS[i], 'XX', expiry, id)
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
