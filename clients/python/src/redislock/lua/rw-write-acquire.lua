-- Redisson RWriteLock acquire (6306ba3b, every version), reimplemented from the algorithm.
-- KEYS[1] = read-write lock hash; ARGV[1] = lease ms, ARGV[2] = writer field ('<owner>:write').
-- No 'mode' (a missing key): mode write, count 1, PEXPIRE lease; reply nil.
-- Mode write and ARGV[2] a field (re-entry): count + 1, PEXPIRE PTTL + lease (the TTL grows with
-- every re-entry); reply nil. Otherwise (read-locked, by this owner too: no upgrade; or another
-- writer) reply the PTTL. Never publishes.
local lock, lease, writer = KEYS[1], ARGV[1], ARGV[2]
local mode = redis.call('hget', lock, 'mode')
if not mode then
    redis.call('hset', lock, 'mode', 'write')
    redis.call('hset', lock, writer, 1)
    redis.call('pexpire', lock, lease)
    return nil
end
if mode == 'write' and redis.call('hexists', lock, writer) == 1 then
    redis.call('hincrby', lock, writer, 1)
    local left = redis.call('pttl', lock)
    redis.call('pexpire', lock, left + lease)
    return nil
end
return redis.call('pttl', lock)
