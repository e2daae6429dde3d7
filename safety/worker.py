"""One client process: loops over the workload and records its history (monotonic clock).

History (JSON lines, see checker.py): every operation is an ``invoke`` line, then its completion
``ok`` / ``fail`` (definitely did not happen) / ``info`` (an error: outcome unknown): ``acquire``
(lease; token), ``read`` (value: the register's elements), ``append`` (el), ``release``; and
``end`` when the critical section ended (before the release call).

Shared arrays tell the fault injector where each worker is: ``phase`` 0 idle, 1 holding the
lock, 2 holding and has read the resource (its write is pending); ``until`` the monotonic time
its critical section is planned to end; ``grants`` how many grants it had.
"""

from __future__ import annotations

import functools
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


def store_keys(role: str) -> list[str]:
    """The register, the highest token seen, the access history: one set per role ({role} tag)."""
    return [f"safety:{role}:register", f"safety:{role}:highest-token", f"safety:{role}:history"]


class Store:
    """The protected resource: a list register (comma-separated elements) on its own server.

    Every access is appended to a history list on the store itself. With a token (guarded
    workload) the store refuses a read or a write whose token is below the highest it has seen,
    and a read or write presents its token (raises the highest): a read-modify-write is only safe
    if the read is fenced too, otherwise two holders can read the same list and both write.
    """

    def __init__(self, port: int, role: str) -> None:
        self.conn = connect(port)
        self.keys = store_keys(role)
        self.read_script = self.conn.register_script(READ_SCRIPT)
        self.write_script = self.conn.register_script(WRITE_SCRIPT)

    def read(self, gid: str, token: int) -> tuple[bool, list[str]]:
        ok, value = self.read_script(keys=self.keys, args=[gid, token])
        text = value.decode() if isinstance(value, bytes) else str(value)
        return bool(ok), [x for x in text.split(",") if x]

    def write(self, gid: str, token: int, value: list[str], element: str) -> bool:
        return bool(self.write_script(keys=self.keys, args=[gid, token, ",".join(value), element]))


def section_length(rng: random.Random, lease: float, main: bool) -> float:
    """Mostly short critical sections (0-10% of the lease). The strategy's workers make one in
    ten long (10-150%): some outlive their lease with no fault at all, as sections without a
    watchdog do. A control's long ones (one in five) stay within 80% of the lease: correct
    without a fault, so its anomalies prove that the fault bit."""
    if rng.random() < (0.9 if main else 0.8):
        return rng.uniform(0, 0.1 * lease)
    return rng.uniform(0.1 * lease, 1.5 * lease if main else 0.8 * lease)


def run(
    index: int,
    config: dict[str, Any],
    ports: dict[str, int],
    log_path: str,
    shared: dict[str, Any],
) -> None:
    """``config``: strategy, role, guarded, lease_ms, sync_timeout, acquire_wait, seed, lock_name."""
    logging.getLogger("redislock").addHandler(logging.NullHandler())  # its warnings are expected here
    rng = random.Random(config["seed"] * 1009 + index)
    lease = config["lease_ms"] / 1000
    phase, grants, until, stop = shared["phase"], shared["grants"], shared["until"], shared["stop"]
    locker = Locker(config["strategy"], ports, lease, config["sync_timeout"], config["lock_name"])
    store = Store(ports["store"], config["role"])
    guarded = bool(config["guarded"])
    n = 0
    with open(log_path, "w", buffering=1) as log:

        def event(op: str, kind: str, gid: str, **fields: Any) -> None:
            log.write(json.dumps({"op": op, "type": kind, "gid": gid, "t": time.monotonic(), **fields}) + "\n")

        def call(op: str, gid: str, fn: Any, errors: Any = (redis.RedisError, OSError), **fields: Any) -> Any:
            """Run one operation between its invoke and its completion; None when it failed."""
            event(op, "invoke", gid, **fields)
            try:
                result = fn()
            except errors as error:
                event(op, "info", gid, error=type(error).__name__)
                return None
            return result

        while not stop.value:
            n += 1
            gid = f"{index}.{n}"
            got = call("acquire", gid, lambda: locker.acquire(config["acquire_wait"]), lease=lease)
            if got is None:
                time.sleep(0.005)
                continue
            if not got:
                event("acquire", "fail", gid)
                continue
            token = locker.token
            event("acquire", "ok", gid, token=token)
            presented = token if guarded and token is not None else -1
            if guarded and token is None:
                raise RuntimeError("guarded workload without a fencing token")
            length = section_length(rng, lease, config["role"] == "main")
            until[index] = time.monotonic() + length
            phase[index] = HOLDING
            grants[index] += 1
            read = call("read", gid, functools.partial(store.read, gid, presented))
            if read is not None:
                ok, value = read
                if not ok:
                    event("read", "fail", gid)
                else:
                    event("read", "ok", gid, value=value)
                    phase[index] = READ
                    time.sleep(max(0.0, until[index] - time.monotonic()))
                    write = functools.partial(store.write, gid, presented, [*value, gid], gid)
                    wrote = call("append", gid, write, el=gid)
                    if wrote is not None:
                        event("append", "ok" if wrote else "fail", gid)
            event("end", "end", gid)
            phase[index] = IDLE
            # Not held any more (lease ran out) or the server is gone: the library raises its own
            # errors, and the lock expires anyway. Unknown outcome.
            if call("release", gid, locker.release, errors=Exception) is not None:
                event("release", "ok", gid)
        locker.close()
