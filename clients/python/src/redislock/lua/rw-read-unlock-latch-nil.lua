-- Redisson RReadLock unlock from 3.44 (6e1b10e1: unlock latch; a missing lock replies nil),
-- reimplemented from the algorithm.
-- KEYS[1] = read-write lock hash, KEYS[2] = channel redisson_rwlock:{name},
-- KEYS[3] = this reader's timeout-key prefix ({name}:<owner>:rwlock_timeout),
-- KEYS[4] = the key prefix of every hold ({name}; hold n of field f is KEYS[4]:f:rwlock_timeout:n),
-- KEYS[5] = unlock latch (redisson_unlock_latch:{name}:<request id>)
-- ARGV[1] = message ("0"), ARGV[2] = reader field (owner), ARGV[3] = PUBLISH | SPUBLISH,
-- ARGV[4] = latch PX ms.
-- A latch already set: reply tonumber(its value), nothing else. No 'mode' (a missing key): publish
-- anyway and set the latch '1', but reply nil (a retry with the same latch replies 1). Every 0
-- reply below sets the latch '0', every 1 reply '1' (after the lock's writes, so a bad PX fails
-- after them); nil replies set none.
-- Not a reader field: nil, nothing changed. Else count - 1 (HDEL at 0) and DEL this hold's
-- timeout key; if other fields remain and some hold's timeout key has a TTL > 0, PEXPIRE the hash
-- to the largest and reply 0 (even when this owner's last hold is gone); else in mode write
-- reply 0; else (the last holder, or all other readers' holds expired) DEL the hash, publish,
-- reply 1.
local lock, channel, prefix, keyprefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local message, reader = ARGV[1], ARGV[2]
local latch, latch_px = KEYS[5], ARGV[4]
local earlier = redis.call('get', latch)
if earlier then
    return tonumber(earlier)
end
local mode = redis.call('hget', lock, 'mode')
if not mode then
    redis.call(ARGV[3], channel, message)
    redis.call('set', latch, 1, 'px', latch_px)
    return nil
end
if redis.call('hexists', lock, reader) == 0 then
    return nil
end
local left = redis.call('hincrby', lock, reader, -1)
if left == 0 then
    redis.call('hdel', lock, reader)
end
redis.call('del', prefix .. ':' .. (left + 1))
if redis.call('hlen', lock) > 1 then
    -- the largest PTTL over every hold of every holder field (O(total holds))
    local longest = -3
    for _, field in ipairs(redis.call('hkeys', lock)) do
        local count = tonumber(redis.call('hget', lock, field))
        if type(count) == 'number' then
            for n = count, 1, -1 do
                local ttl = redis.call('pttl', keyprefix .. ':' .. field .. ':rwlock_timeout:' .. n)
                longest = math.max(longest, ttl)
            end
        end
    end
    if longest > 0 then
        redis.call('pexpire', lock, longest)
        redis.call('set', latch, 0, 'px', latch_px)
        return 0
    end
    if mode == 'write' then
        redis.call('set', latch, 0, 'px', latch_px)
        return 0
    end
end
-- the last hold, or every other reader's timeout keys have expired: the lock is free
redis.call('del', lock)
redis.call(ARGV[3], channel, message)
redis.call('set', latch, 1, 'px', latch_px)
return 1
