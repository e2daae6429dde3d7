-- Redisson RCountDownLatch trySetCount before 3.22 (956d64cc), reimplemented from the documented behaviour.
-- KEYS[1] = latch, KEYS[2] = channel; ARGV[1] = message ("1"), ARGV[2] = count. Absent: SET the count, PUBLISH, 1; else 0.
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('set', KEYS[1], ARGV[2])
    redis.call('publish', KEYS[2], ARGV[1])
    return 1
end
return 0
