-- Redisson RCountDownLatch delete before 3.22 (23bcabf6), reimplemented from the documented behaviour.
-- KEYS[1] = latch, KEYS[2] = channel; ARGV[1] = message ("1"). 1 deleted and PUBLISHed; 0 absent.
if redis.call('del', KEYS[1]) == 1 then
    redis.call('publish', KEYS[2], ARGV[1])
    return 1
end
return 0
