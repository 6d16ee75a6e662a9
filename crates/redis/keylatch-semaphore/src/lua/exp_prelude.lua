-- keylatch permit-expirable semaphore: what every script of it starts from (prepended to each
-- at build time, so each script stays one EVALSHA).
-- KEYS[1] the available count, KEYS[2] the timeout zset (permit id -> expiry, ms of the server
-- clock), KEYS[3] the wake-up channel.

-- A permit id is stored as Redisson stores it: the raw bytes its hex form stands for (16 bytes
-- for Redisson's and keylatch's 32 hex digits). Scripts take ids in hex (even length, checked
-- by the caller) and turn them into those bytes.
local function raw_id(hex)
  return (string.gsub(hex, '..', function(pair)
    return string.char(tonumber(pair, 16))
  end))
end

-- An integer stored as a string, or nil when it is not one.
local function integer(raw)
  return #raw <= 18 and string.match(raw, '^%-?%d+$') and tonumber(raw) or nil
end

-- Reads the available count and the server clock and reclaims the permits whose lease ended,
-- publishing the new count if there were any. Returns the stored count (nil when missing),
-- the available count (nil when the stored one is not an integer) and the time in ms.
local function reclaim()
  local value = redis.call('get', KEYS[1])
  local available = 0
  if value then
    available = integer(value)
    if not available then
      return value, nil, 0
    end
  end
  local clock = redis.call('time')
  local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  -- A lease has ended once the clock is past its expiry, as Redis judges a key's PEXPIRE: the
  -- clock is read in whole ms, so at `now == expiry` up to a ms of the lease may be left, and
  -- the holder's own count of its validity may still run.
  local expired = redis.call('zremrangebyscore', KEYS[2], '-inf', string.format('(%d', now))
  if expired > 0 then
    available = redis.call('incrby', KEYS[1], expired)
    redis.call('publish', KEYS[3], available)
  end
  return value, available, now
end

-- Removes the permits ARGV[first..] (hex ids) from the timeout zset, adds them to the
-- available count and publishes the new count, when any was held. Returns how many were held.
local function give_back(available, first)
  local released = 0
  for i = first, #ARGV do
    released = released + redis.call('zrem', KEYS[2], raw_id(ARGV[i]))
  end
  if released > 0 then
    available = redis.call('incrby', KEYS[1], released)
    redis.call('publish', KEYS[3], available)
  end
  return released
end

local NOT_A_COUNT = 'WRONGTYPE the permit count is not an integer'

