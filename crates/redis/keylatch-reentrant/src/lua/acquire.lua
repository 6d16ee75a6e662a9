-- keylatch reentrant lock: acquire or re-enter.
-- KEYS[1] the lock hash, KEYS[2] the fencing counter, KEYS[3] the holder metadata hash
-- (keylatch's own `keylatch_meta:{name}`, which Redisson never reads)
-- ARGV[1] lease in ms, ARGV[2] owner id, ARGV[3] '1' to issue a fencing token,
-- ARGV[4] '1' for a non-reentrant lock (Redisson's RedissonNonReentrantLock: same layout),
-- ARGV[5] the holder's metadata lines (host, pid, program), '' to record none
-- Returns nil when acquired (Redisson's convention), {token} when acquired with fencing,
-- -3 when the lock is non-reentrant and the owner already holds it (nothing changed),
-- otherwise the holder's PTTL in ms (-1: held without an expiry).
-- A key of another type raises WRONGTYPE before anything is written.
-- A damaged fencing counter is refused before anything is written.
if ARGV[3] == '1' then
  local counter = redis.call('get', KEYS[2])
  if counter and not (#counter <= 18 and string.match(counter, '^%d+$')) then
    return redis.error_reply('WRONGTYPE the fencing counter is not an integer')
  end
end
local held = redis.call('hexists', KEYS[1], ARGV[2]) == 1
if held and ARGV[4] == '1' then
  return -3
end
if held or redis.call('exists', KEYS[1]) == 0 then
  local token = false
  if ARGV[3] == '1' then
    token = next_token(KEYS[2])
  end
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  if ARGV[5] and ARGV[5] ~= '' then
    if not held then
      local now = redis.call('time')
      redis.call('hset', KEYS[3], ARGV[2],
        string.format('since_ms=%.0f\n', now[1] * 1000 + math.floor(now[2] / 1000)) .. ARGV[5])
    end
    redis.call('pexpire', KEYS[3], ARGV[1])
  end
  if token then
    return {token}
  end
  return nil
end
return redis.call('pttl', KEYS[1])
