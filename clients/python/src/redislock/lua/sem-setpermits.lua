-- Redisson RPermitExpirableSemaphore setPermits (3.23.4+), reimplemented from the algorithm (not
-- Redisson's text): the total (available + held) becomes ARGV[1].
-- KEYS[1] = semaphore, KEYS[2] = channel 'redisson_sc:{name}', KEYS[3] = held-permit zset.
-- ARGV[1] = the new total, ARGV[2] = PUBLISH | SPUBLISH.
-- Missing semaphore: SET the total, publish it. Else total = available + held (expired ids still
-- count: nothing is reclaimed); equal: nothing; otherwise INCRBY the difference and publish the
-- new total. Reply nil.
local sem, channel, held = KEYS[1], KEYS[2], KEYS[3]
local total, publish = tonumber(ARGV[1]), ARGV[2]
local value = redis.call('get', sem)
if value == false then
    redis.call('set', sem, ARGV[1])
    redis.call(publish, channel, ARGV[1])
    return nil
end
local now = tonumber(value) + redis.call('zcard', held)
if now ~= total then
    redis.call('incrby', sem, total - now)
    redis.call(publish, channel, ARGV[1])
end
return nil
