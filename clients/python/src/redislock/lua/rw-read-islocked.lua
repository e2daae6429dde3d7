-- Redisson RReadLock isLocked from 3.24 (8ad44f1b), reimplemented from the algorithm.
-- KEYS[1] = read-write lock hash; no ARGV. Read-only.
-- Reply 1 in mode read, or in mode write when HLEN > 2 (the writer also holds read holds); else 0.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == 'read' or (mode == 'write' and redis.call('hlen', KEYS[1]) > 2) then
    return 1
end
return 0
