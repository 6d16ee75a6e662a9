-- keylatch delayed queue: shared parts.
-- The server's clock in whole milliseconds.
local function now_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A whole number of milliseconds in plain decimal (what Redisson reads with Long.valueOf).
local function ms(n)
  return string.format('%d', n)
end

-- The value of a packed element, or nil when it is neither packing. Redisson's current packing
-- is struct 'Bc0Lc0': the random id's length (a byte), the id, the value's length (the
-- server's unsigned long, 8 bytes), the value. The packing of Redisson before 3.21.1 is
-- 'dLc0': a double, the value's length, the value. Each is read only when its lengths add up.
local function unpack_element(v)
  local n = #v
  if n >= 9 then
    local idlen = string.byte(v, 1)
    if n >= 1 + idlen + 8 then
      local len = struct.unpack('L', v, 2 + idlen)
      if n == 1 + idlen + 8 + len then
        return string.sub(v, 1 + idlen + 8 + 1)
      end
    end
  end
  if n >= 16 then
    local len = struct.unpack('L', v, 9)
    if n == 16 + len then
      return string.sub(v, 17)
    end
  end
  return nil
end

-- Moves up to `limit` elements due by `now` from the delay zset (KEYS[2]) and list (KEYS[3]) to
-- the destination list (KEYS[1]), in due order, as Redisson's transfer does. An element that
-- neither packing reads goes to the unreadable list (KEYS[4]) instead of being delivered
-- half-read. Returns how many moved.
local function move_due(now, limit)
  local due = redis.call('zrangebyscore', KEYS[2], 0, now, 'limit', 0, limit)
  for _, v in ipairs(due) do
    local value = unpack_element(v)
    if value then
      redis.call('rpush', KEYS[1], value)
    else
      redis.call('rpush', KEYS[4], v)
    end
    redis.call('lrem', KEYS[3], 1, v)
  end
  if #due > 0 then
    redis.call('zrem', KEYS[2], unpack(due))
  end
  return #due
end

-- A processing or retry record `<delivery count>:<value>`: the count and the value.
local function split_record(record)
  local i = string.find(record, ':', 1, true)
  return tonumber(string.sub(record, 1, i - 1)), string.sub(record, i + 1)
end

-- Gives back up to `limit` deliveries whose visibility timeout passed by `now` (KEYS[6] the
-- deadlines zset, KEYS[5] the processing hash): to the retry list (KEYS[7]) for another
-- delivery, or to the dead-letter list (KEYS[8]) once delivered `max` times.
local function reclaim(now, max, limit)
  local late = redis.call('zrangebyscore', KEYS[6], 0, now, 'limit', 0, limit)
  for _, field in ipairs(late) do
    local record = redis.call('hget', KEYS[5], field)
    if record then
      local count, value = split_record(record)
      if count >= max then
        redis.call('rpush', KEYS[8], value)
      else
        redis.call('rpush', KEYS[7], record)
      end
      redis.call('hdel', KEYS[5], field)
    end
  end
  if #late > 0 then
    redis.call('zrem', KEYS[6], unpack(late))
  end
  return #late
end
