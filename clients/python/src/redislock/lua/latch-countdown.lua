-- Redisson RCountDownLatch countDown (38060fab), reimplemented from the documented behaviour.
-- KEYS[1] = latch, KEYS[2] = channel; ARGV[1] = message ("0"), ARGV[2] = publish command.
-- DECR; <= 0 deletes; == 0 publishes; nil.
local left = redis.call('decr', KEYS[1])
if left <= 0 then
    redis.call('del', KEYS[1])
end
if left == 0 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
end
