-- Redisson RCountDownLatch countDown before 3.22 (c103a1b2), reimplemented from the documented behaviour.
-- KEYS[1] = latch, KEYS[2] = channel; ARGV[1] = message ("0"). DECR; <= 0 deletes; == 0 PUBLISHes; nil.
local left = redis.call('decr', KEYS[1])
if left <= 0 then
    redis.call('del', KEYS[1])
end
if left == 0 then
    redis.call('publish', KEYS[2], ARGV[1])
end
