-- Redisson RReadLock watchdog renewal up to 3.43 (6563941f), reimplemented from the algorithm.
-- KEYS[1] = read-write lock hash, KEYS[2] = the key prefix of every hold ({name}; hold n of field
-- f is KEYS[2]:f:rwlock_timeout:n); ARGV[1] = lease ms, ARGV[2] = reader field (owner).
-- ARGV[2] a field: PEXPIRE the hash and, when HLEN > 1, every hold's timeout key of every numeric
-- field (other owners' and other clients' holds too; O(total holds)); reply 1. Else 0, untouched.
local lock, keyprefix, lease = KEYS[1], KEYS[2], ARGV[1]
if redis.call('hexists', lock, ARGV[2]) == 0 then
    return 0
end
redis.call('pexpire', lock, lease)
if redis.call('hlen', lock) > 1 then
    for _, field in ipairs(redis.call('hkeys', lock)) do
        local count = tonumber(redis.call('hget', lock, field))
        if type(count) == 'number' then
            for n = count, 1, -1 do
                redis.call('pexpire', keyprefix .. ':' .. field .. ':rwlock_timeout:' .. n, lease)
            end
        end
    end
end
return 1
