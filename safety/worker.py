"""One client process: loops over the workload and logs what it saw (monotonic clock).

Event log (JSON lines): ``grant`` (gid, t, wait), ``read`` (gid, ok), ``write`` (gid, el, ok),
``release`` (gid, t: when the critical section ended, before the release call), ``error``.
The shared ``phase`` array tells the fault injector where each worker is:
0 idle, 1 holding the lock, 2 holding and has read the resource (its write is pending).
"""

from __future__ import annotations

import json
import logging
import random
import time
from typing import Any

import redis

from strategies import Locker, connect

IDLE, HOLDING, READ = 0, 1, 2

READ_SCRIPT = """
local token = tonumber(ARGV[2])
local highest = tonumber(redis.call('get', KEYS[2]) or '-1')
if token >= 0 then
  if highest > token then
    redis.call('rpush', KEYS[3], 'r ' .. ARGV[1] .. ' ' .. ARGV[2] .. ' 0 -')
    return {0, ''}
  end
  redis.call('set', KEYS[2], ARGV[2])
end
redis.call('rpush', KEYS[3], 'r ' .. ARGV[1] .. ' ' .. ARGV[2] .. ' 1 -')
return {1, redis.call('get', KEYS[1]) or ''}
"""

WRITE_SCRIPT = """
local token = tonumber(ARGV[2])
local highest = tonumber(redis.call('get', KEYS[2]) or '-1')
if token >= 0 then
  if highest > token then
    redis.call('rpush', KEYS[3], 'w ' .. ARGV[1] .. ' ' .. ARGV[2] .. ' 0 ' .. ARGV[4])
    return 0
  end
  redis.call('set', KEYS[2], ARGV[2])
end
redis.call('set', KEYS[1], ARGV[3])
redis.call('rpush', KEYS[3], 'w ' .. ARGV[1] .. ' ' .. ARGV[2] .. ' 1 ' .. ARGV[4])
return 1
"""

STORE_KEYS = ["safety:set", "safety:highest-token", "safety:history"]


class Store:
    """The protected resource: a set (comma-separated elements) on its own server.

    Every access is appended to a history list on the store itself. With a token (guarded
    workload) the store refuses a read or a write whose token is below the highest it has seen,
    and a read or write presents its token (raises the highest): a read-modify-write is only safe
    if the read is fenced too, otherwise two holders can read the same set and both write.
    """

    def __init__(self, port: int) -> None:
        self.conn = connect(port)
        self.read_script = self.conn.register_script(READ_SCRIPT)
        self.write_script = self.conn.register_script(WRITE_SCRIPT)

    def read(self, gid: str, token: int) -> tuple[bool, str]:
        ok, value = self.read_script(keys=STORE_KEYS, args=[gid, token])
        return bool(ok), value.decode() if isinstance(value, bytes) else str(value)

    def write(self, gid: str, token: int, value: str, element: str) -> bool:
        return bool(self.write_script(keys=STORE_KEYS, args=[gid, token, value, element]))


def run(
    index: int,
    config: dict[str, Any],
    ports: dict[str, int],
    log_path: str,
    phase: Any,
    grants: Any,
    stop: Any,
) -> None:
    logging.getLogger("redislock").addHandler(logging.NullHandler())  # its warnings are expected here
    rng = random.Random(index * 7919 + int(time.time()))
    workload = config["workload"]
    hold_max = config["hold_ms"] / 1000
    locker = Locker(config["strategy"], ports, config["lease_ms"] / 1000, config["sync_timeout"])
    store = Store(ports["store"]) if workload != "mutex" else None
    guarded = workload == "guarded"
    n = 0
    with open(log_path, "w", buffering=1) as log:

        def event(**fields: Any) -> None:
            log.write(json.dumps(fields) + "\n")

        start: float | None = None  # first attempt since the last grant: waits include failed attempts
        while not stop.value:
            if start is None:
                start = time.monotonic()
            try:
                got = locker.acquire(config["acquire_wait"])
            except (redis.RedisError, OSError) as error:
                event(k="error", op="acquire", t=time.monotonic(), e=type(error).__name__)
                time.sleep(0.005)
                continue
            if not got:
                event(k="timeout", t=time.monotonic())
                continue
            granted = time.monotonic()
            n += 1
            gid = f"{index}.{n}"
            token = locker.token if guarded and locker.token is not None else -1
            if guarded and token < 0:
                raise RuntimeError("guarded workload without a fencing token")
            phase[index] = HOLDING
            grants[index] += 1
            event(k="grant", gid=gid, t=granted, wait=granted - start, token=token)
            start = None
            try:
                if store is None:
                    time.sleep(rng.uniform(0, hold_max))
                else:
                    ok, value = store.read(gid, token)
                    event(k="read", gid=gid, ok=ok)
                    if ok:
                        phase[index] = READ
                        time.sleep(rng.uniform(0, hold_max))
                        element = gid
                        new = f"{value},{element}" if value else element
                        ok = store.write(gid, token, new, element)
                        event(k="write", gid=gid, el=element, ok=ok)
            except (redis.RedisError, OSError) as error:
                event(k="error", op="store", gid=gid, t=time.monotonic(), e=type(error).__name__)
            event(k="release", gid=gid, t=time.monotonic())
            phase[index] = IDLE
            try:
                locker.release()
            except Exception as error:  # not held any more, or the server is gone: the lock expires
                event(k="error", op="release", gid=gid, t=time.monotonic(), e=type(error).__name__)
        locker.close()
