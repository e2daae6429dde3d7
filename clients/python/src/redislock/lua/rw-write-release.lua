-- The Python client's write unlock: Redisson's write unlock from 3.22 (rw-write-unlock.lua's
-- layout) except that a missing lock (no 'mode') replies nil without a message, as
-- LOCK.RELEASE ... WRITE does, and a lease of 0 keeps the current TTL while write holds remain
-- (a partial release of a fixed-lease hold does not move its deadline).
-- KEYS[1] = read-write lock hash, KEYS[2] = channel redisson_rwlock:{name}
-- ARGV[1] = message ("1"), ARGV[2] = lease ms re-applied while write holds remain (0: keep the
-- TTL), ARGV[3] = writer field ('<owner>:write'), ARGV[4] = PUBLISH | SPUBLISH.
-- Reply: nil (not the writer); 0 (write holds remain); 1 (the last write hold is gone: the lock
-- is freed and published, or stays in mode read for the writer's own read holds, no message).
local lock, channel = KEYS[1], KEYS[2]
local message, lease, writer, publish = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
if redis.call('hget', lock, 'mode') ~= 'write' or redis.call('hexists', lock, writer) == 0 then
    return nil
end
if redis.call('hincrby', lock, writer, -1) > 0 then
    if lease > 0 then
        redis.call('pexpire', lock, lease)
    end
    return 0
end
redis.call('hdel', lock, writer)
if redis.call('hlen', lock) == 1 then
    redis.call('del', lock)
    redis.call(publish, channel, message)
else
    redis.call('hset', lock, 'mode', 'read')
end
return 1
