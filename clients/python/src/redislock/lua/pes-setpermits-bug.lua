-- Redisson RPermitExpirableSemaphore setPermits (055e71de), reimplemented from the documented behaviour.
-- KEYS[1] = count, KEYS[2] = channel, KEYS[3] = zset; ARGV[1] = total, ARGV[2] = publish command.
-- Absent: SET and publish the total. Else INCRBY total - (available + held) and publish the total (the equality test compares a number with a string: never true).
local available = redis.call('get', KEYS[1]);
if (available == false) then
    redis.call('set', KEYS[1], ARGV[1]);
    redis.call(ARGV[2], KEYS[2], ARGV[1]);
    return;
end;
local acquired = redis.call('zcount', KEYS[3], '-inf', '+inf');
local maximum = tonumber(available) + acquired;
if maximum == ARGV[1] then
    return;
end;
redis.call('incrby', KEYS[1], tonumber(ARGV[1]) - maximum);
redis.call(ARGV[2], KEYS[2], ARGV[1]);
