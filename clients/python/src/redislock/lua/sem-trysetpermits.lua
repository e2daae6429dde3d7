-- Redisson RSemaphore / RPermitExpirableSemaphore trySetPermits (3.22+), reimplemented from the
-- algorithm (not Redisson's text).
-- KEYS[1] = semaphore, KEYS[2] = channel 'redisson_sc:{name}'.
-- ARGV[1] = permits, ARGV[2] = PUBLISH | SPUBLISH.
-- Only a missing semaphore is set (a stored 0 counts as set): SET ARGV[1], publish it, reply 1.
-- Otherwise reply 0 and change nothing.
local sem, channel = KEYS[1], KEYS[2]
if redis.call('exists', sem) == 1 then
    return 0
end
redis.call('set', sem, ARGV[1])
redis.call(ARGV[2], channel, ARGV[1])
return 1
