-- Redisson RCountDownLatch trySetCount (2a52d54a), reimplemented from the documented behaviour.
-- KEYS[1] = latch, KEYS[2] = channel; ARGV[1] = message ("1"), ARGV[2] = count, ARGV[3] = publish command.
-- Absent: SET the count (no validation), publish the message, 1; else 0.
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('set', KEYS[1], ARGV[2])
    redis.call(ARGV[3], KEYS[2], ARGV[1])
    return 1
end
return 0
