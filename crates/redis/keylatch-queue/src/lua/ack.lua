-- keylatch delayed queue: acknowledge a reliable take's delivery: the element is done.
-- KEYS[1] the processing hash, KEYS[2] the deadlines zset; ARGV[1] the delivery's field
-- Returns 1 when the delivery was still this consumer's, 0 when it had been given back (its
-- visibility timeout passed: another delivery of the element may follow or have followed).
redis.call('zrem', KEYS[2], ARGV[1])
return redis.call('hdel', KEYS[1], ARGV[1])
