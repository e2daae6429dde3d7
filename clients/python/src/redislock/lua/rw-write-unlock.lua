-- Redisson RWriteLock unlock as 3.22-3.23 did it (319a1cdf: publish command from ARGV, no latch),
-- reimplemented from the algorithm.
-- KEYS[1] = read-write lock hash, KEYS[2] = channel redisson_rwlock:{name}
-- ARGV[1] = message ("1"), ARGV[2] = lease ms re-applied while write holds remain,
-- ARGV[3] = writer field ('<owner>:write'), ARGV[4] = PUBLISH | SPUBLISH.
-- No 'mode' (a missing key): publish anyway, reply 1 (an unlock of a lost lock looks successful).
-- Mode not write, or ARGV[3] not a field: nil, nothing changed. Count still > 0: PEXPIRE ARGV[2],
-- reply 0. Count 0: HDEL; if only 'mode' is left DEL the hash and publish, else (the writer
-- keeps read holds) set mode read without a message; reply 1.
local lock, channel = KEYS[1], KEYS[2]
local message, lease, writer = ARGV[1], ARGV[2], ARGV[3]
local mode = redis.call('hget', lock, 'mode')
if not mode then
    redis.call(ARGV[4], channel, message)
    return 1
end
if mode ~= 'write' or redis.call('hexists', lock, writer) == 0 then
    return nil
end
if redis.call('hincrby', lock, writer, -1) > 0 then
    redis.call('pexpire', lock, lease)
    return 0
end
redis.call('hdel', lock, writer)
if redis.call('hlen', lock) == 1 then
    redis.call('del', lock)
    redis.call(ARGV[4], channel, message)
else
    -- the writer keeps read holds: the lock stays, readable, and nobody is told
    redis.call('hset', lock, 'mode', 'read')
end
return 1
