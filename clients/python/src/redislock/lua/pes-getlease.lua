-- Redisson RPermitExpirableSemaphore getLeaseTime (8be95cb5), reimplemented from the documented behaviour.
-- KEYS[1] = count, KEYS[2] = zset, KEYS[3] = channel; ARGV[1] = id, ARGV[2] = no-lease score, ARGV[3] = now, ARGV[4] = publish command.
-- Reclaim; 0 when the id holds nothing, -1 without a lease, else the ms left.
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, -1);
local reclaimed = nil;
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired));
    reclaimed = redis.call('incrby', KEYS[1], #expired);
    if tonumber(reclaimed) > 0 then redis.call(ARGV[4], KEYS[3], reclaimed); end;
end;
local v = redis.call('zscore', KEYS[2], ARGV[1]);
if v == false then
    return 0;
end;
if v == ARGV[2] then
    return -1;
end;
return tonumber(v) - tonumber(ARGV[3]);
