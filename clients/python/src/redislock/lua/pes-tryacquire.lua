-- Redisson RPermitExpirableSemaphore tryAcquire (992c96b0), reimplemented from the documented behaviour.
-- KEYS[1] = count, KEYS[2] = zset, KEYS[3] = channel; ARGV[1] = n, ARGV[2] = score, ARGV[3] = now,
-- ARGV[4] = no-lease score, ARGV[5] = publish command, ARGV[6..5+n] = ids.
-- Reclaim (LIMIT n), then take all n: 'OK'; else ':<lowest score>' or nil.
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1]);
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired));
    local value = redis.call('incrby', KEYS[1], #expired);
    if tonumber(value) > 0 then redis.call(ARGV[5], KEYS[3], value); end;
end;
local value = redis.call('get', KEYS[1]);
if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then
    redis.call('decrby', KEYS[1], ARGV[1]);
    for i = 6, 5 + tonumber(ARGV[1]) do
        redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]);
    end;
    local ttl = redis.call('pttl', KEYS[1]);
    if ttl > 0 then
        redis.call('pexpire', KEYS[2], ttl);
    end;
    return 'OK';
end;
local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES');
if v[1] ~= nil and v[2] ~= ARGV[4] then
    return ':' .. v[2];
end;
return nil;
