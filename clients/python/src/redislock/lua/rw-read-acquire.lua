-- Redisson RReadLock acquire (95553a6f, every version), reimplemented from the algorithm.
-- KEYS[1] = read-write lock hash ('mode' -> read|write, '<owner>' and '<owner>:write' -> count)
-- KEYS[2] = this reader's timeout-key prefix ('{name}:<owner>:rwlock_timeout'; hold n is KEYS[2]:n)
-- ARGV[1] = lease ms, ARGV[2] = reader field (owner), ARGV[3] = the same owner's writer field.
-- No 'mode' (a missing key): mode read, count 1, timeout key 1, hash PEXPIRE lease; reply nil.
-- Mode read, or mode write held by ARGV[3] (a writer takes read holds): count + 1, timeout key n,
-- hash PEXPIRE max(PTTL, lease); reply nil. Otherwise reply the hash's PTTL. Never publishes.
local lock, prefix = KEYS[1], KEYS[2]
local lease, reader, writer = ARGV[1], ARGV[2], ARGV[3]
local mode = redis.call('hget', lock, 'mode')
if not mode then
    redis.call('hset', lock, 'mode', 'read')
    redis.call('hset', lock, reader, 1)
    local hold = prefix .. ':1'
    redis.call('set', hold, 1)
    redis.call('pexpire', hold, lease)
    redis.call('pexpire', lock, lease)
    return nil
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', lock, writer) == 1) then
    local n = redis.call('hincrby', lock, reader, 1)
    local hold = prefix .. ':' .. n
    redis.call('set', hold, 1)
    redis.call('pexpire', hold, lease)
    local left = redis.call('pttl', lock)
    redis.call('pexpire', lock, math.max(left, lease))
    return nil
end
return redis.call('pttl', lock)
