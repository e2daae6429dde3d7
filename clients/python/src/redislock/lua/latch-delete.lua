-- Redisson RCountDownLatch delete (47aed1b8), reimplemented from the documented behaviour.
-- KEYS[1] = latch, KEYS[2] = channel; ARGV[1] = message ("1"), ARGV[2] = publish command. 1 deleted and published; 0 absent.
if redis.call('del', KEYS[1]) == 1 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
