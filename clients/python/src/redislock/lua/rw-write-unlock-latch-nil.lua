-- Redisson RWriteLock unlock from 3.44 (21f5fb0f: unlock latch; a missing lock replies nil),
-- reimplemented from the algorithm.
-- KEYS[1] = read-write lock hash, KEYS[2] = channel redisson_rwlock:{name},
-- KEYS[3] = unlock latch (redisson_unlock_latch:{name}:<request id>)
-- ARGV[1] = message ("1"), ARGV[2] = lease ms re-applied while write holds remain,
-- ARGV[3] = writer field ('<owner>:write'), ARGV[4] = PUBLISH | SPUBLISH, ARGV[5] = latch PX ms.
-- A latch already set: reply tonumber(its value), nothing else. No 'mode' (a missing key): publish
-- anyway and set the latch '1', but reply nil (a retry with the same latch replies 1). Every 0
-- reply below sets the latch '0', every 1 reply '1' (after the lock's writes, so a bad PX fails
-- after them); nil replies set none.
-- Mode not write, or ARGV[3] not a field: nil, nothing changed. Count still > 0: PEXPIRE ARGV[2],
-- reply 0. Count 0: HDEL; if only 'mode' is left DEL the hash and publish, else (the writer
-- keeps read holds) set mode read without a message; reply 1.
local lock, channel = KEYS[1], KEYS[2]
local message, lease, writer = ARGV[1], ARGV[2], ARGV[3]
local latch, latch_px = KEYS[3], ARGV[5]
local earlier = redis.call('get', latch)
if earlier then
    return tonumber(earlier)
end
local mode = redis.call('hget', lock, 'mode')
if not mode then
    redis.call(ARGV[4], channel, message)
    redis.call('set', latch, 1, 'px', latch_px)
    return nil
end
if mode ~= 'write' or redis.call('hexists', lock, writer) == 0 then
    return nil
end
if redis.call('hincrby', lock, writer, -1) > 0 then
    redis.call('pexpire', lock, lease)
    redis.call('set', latch, 0, 'px', latch_px)
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
redis.call('set', latch, 1, 'px', latch_px)
return 1
