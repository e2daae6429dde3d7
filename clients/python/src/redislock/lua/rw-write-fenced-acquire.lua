-- The Python client's fenced write acquire: Redisson's write acquire (rw-write-acquire.lua) plus
-- RFencedLock's token: every successful acquire INCRs the token counter the plain lock's fencing
-- uses (redisson_lock_token:{name}).
-- KEYS[1] = read-write lock hash, KEYS[2] = token counter; ARGV[1] = lease ms,
-- ARGV[2] = writer field ('<owner>:write').
-- Reply {-1, token} when taken or re-entered (re-entry: PTTL + lease, as the write acquire);
-- {pttl, -1} otherwise, the counter untouched.
local lock, counter, lease, writer = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local mode = redis.call('hget', lock, 'mode')
if not mode then
    redis.call('hset', lock, 'mode', 'write')
    redis.call('hset', lock, writer, 1)
    redis.call('pexpire', lock, lease)
    return {-1, redis.call('incr', counter)}
end
if mode == 'write' and redis.call('hexists', lock, writer) == 1 then
    redis.call('hincrby', lock, writer, 1)
    redis.call('pexpire', lock, redis.call('pttl', lock) + lease)
    return {-1, redis.call('incr', counter)}
end
return {redis.call('pttl', lock), -1}
