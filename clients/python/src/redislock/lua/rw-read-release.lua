-- The Python client's read unlock: Redisson's read unlock from 3.22 (rw-read-unlock.lua's layout)
-- except that a missing lock (no 'mode') replies nil without a message, as LOCK.RELEASE ... READ
-- does, so releasing an expired hold raises NotOwnedError instead of looking successful.
-- KEYS[1] = read-write lock hash, KEYS[2] = channel redisson_rwlock:{name},
-- KEYS[3] = this reader's timeout-key prefix ({name}:<owner>:rwlock_timeout),
-- KEYS[4] = the key prefix of every hold ({name}; hold n of field f is KEYS[4]:f:rwlock_timeout:n)
-- ARGV[1] = message ("0"), ARGV[2] = reader field (owner), ARGV[3] = PUBLISH | SPUBLISH.
-- Reply: nil (no read hold); 0 (a hold dropped, live holds remain); 1 (freed + published).
local lock, channel, prefix, keyprefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local message, reader, publish = ARGV[1], ARGV[2], ARGV[3]
local mode = redis.call('hget', lock, 'mode')
if not mode or redis.call('hexists', lock, reader) == 0 then
    return nil
end
local left = redis.call('hincrby', lock, reader, -1)
if left == 0 then
    redis.call('hdel', lock, reader)
end
redis.call('del', prefix .. ':' .. (left + 1))
if redis.call('hlen', lock) > 1 then
    local longest = -3
    for _, field in ipairs(redis.call('hkeys', lock)) do
        local count = tonumber(redis.call('hget', lock, field))
        if type(count) == 'number' then
            for n = count, 1, -1 do
                longest = math.max(longest, redis.call('pttl', keyprefix .. ':' .. field .. ':rwlock_timeout:' .. n))
            end
        end
    end
    if longest > 0 then
        redis.call('pexpire', lock, longest)
        return 0
    end
    if mode == 'write' then
        return 0
    end
end
redis.call('del', lock)
redis.call(publish, channel, message)
return 1
