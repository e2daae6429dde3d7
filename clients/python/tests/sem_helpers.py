"""Shared pieces of the semaphore tests: the servers of both modes (module mode skipped when the
module has no LOCK.SEMACQUIRE) and a "Redisson-script client": raw EVAL of our pes-*.lua / semaphore-*.lua files
with the KEYS/ARGV a Redisson 3.41+ RPermitExpirableSemaphore sends (client clock, 16-byte ids)."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
import redis
from conftest import lua_script
from kind_helpers import pick_server as pick_kind_server
from kind_helpers import prefixed, register_native, suffixed
from servers import Server

from redislock._compat import get_connection

NO_LEASE = 922337203685477


def module_has_semaphore(server: Server) -> bool:
    """Whether the server knows LOCK.SEMACQUIRE (COMMAND INFO, read raw: redis-py's reply
    parser does not take the nil of an unknown command)."""
    with server.client() as r:
        conn = get_connection(r.connection_pool)
        try:
            conn.send_command("COMMAND", "INFO", "lock.semacquire")
            reply = conn.read_response()
        finally:
            r.connection_pool.release(conn)
    return bool(reply) and reply[0] is not None


# Our op files registered under the Redisson operations they implement (the module runs a
# script of a registered SHA1 natively, as it runs Redisson's own texts).
NATIVE_OPS = (
    "pes-tryacquire",
    "pes-release-many",
    "pes-release-many-partial",
    "pes-available",
    "pes-setpermits",
    "semaphore-trysetpermits",
    "pes-updatelease",
)


def native_runs(r: redis.Redis) -> int:
    """How many semaphore scripts ran natively (INFO lock)."""
    info = r.info("lock")
    return sum(
        int(v)
        for k, v in info.items()
        if k.startswith(("lock_redisson_pes_", "lock_redisson_semaphore_")) and k.endswith("_native")
    )


def scripts_native(r: redis.Redis) -> bool:
    try:
        return r.config_get("lock.redisson-scripts").get("lock.redisson-scripts") == "native"
    except redis.ResponseError:
        return False


def zset(name: str) -> str:
    return suffixed(name, "timeout")


def channel(name: str) -> str:
    return prefixed("redisson_sc", name)


def now_ms() -> int:
    return int(time.time() * 1000)


def held(r: redis.Redis, name: str) -> int:
    """Permits in the zset (held, or expired and not yet returned)."""
    return int(r.zcard(zset(name)))


def available(r: redis.Redis, name: str) -> int:
    value = r.get(name)
    return 0 if value is None else int(value)


class ScriptClient:
    """A Redisson RPermitExpirableSemaphore (3.41+) on ``name``, through our pes-*.lua / semaphore-*.lua files
    with Redisson's KEYS/ARGV order and replies."""

    def __init__(self, r: redis.Redis, name: str) -> None:
        self.r = r
        self.name = name
        self.zset = zset(name)
        self.channel = channel(name)

    def _eval(self, op: str, keys: list[str], args: list[Any]) -> Any:
        return self.r.eval(lua_script(op), len(keys), *keys, *args)

    def try_set_permits(self, permits: int) -> Any:
        return self._eval("semaphore-trysetpermits", [self.name, self.channel], [permits, "PUBLISH"])

    def set_permits(self, permits: int) -> Any:
        return self._eval("pes-setpermits", [self.name, self.channel, self.zset], [permits, "PUBLISH"])

    def try_acquire(self, n: int = 1, lease_ms: int | None = None) -> tuple[Any, list[bytes]]:
        """tryAcquire(n, lease): reply (b'OK', b':<expiry>' or None) and the ids sent."""
        ids = [os.urandom(16) for _ in range(n)]
        now = now_ms()
        expiry = NO_LEASE if lease_ms is None else now + lease_ms
        reply = self._eval(
            "pes-tryacquire", [self.name, self.zset, self.channel], [n, expiry, now, NO_LEASE, "PUBLISH", *ids]
        )
        return reply, ids

    def release(self, ids: list[bytes]) -> Any:
        """release(ids), 3.41+: all or nothing; reply the count released (0: nothing)."""
        return self._eval(
            "pes-release-many", [self.name, self.channel, self.zset], [len(ids), now_ms(), "PUBLISH", *ids]
        )

    def available(self) -> int:
        return int(self._eval("pes-available", [self.name, self.zset, self.channel], [now_ms(), "PUBLISH"]))

    def update_lease(self, permit_id: bytes, lease_ms: int) -> Any:
        now = now_ms()
        return self._eval(
            "pes-updatelease", [self.name, self.zset, self.channel], [permit_id, now + lease_ms, now, "PUBLISH"]
        )


def native_scripts(server: Server) -> bool:
    """Our Lua of the semaphore's operations run natively on `server`."""
    return register_native(server, NATIVE_OPS)


def pick_server(request: pytest.FixtureRequest, mode: str) -> Server:
    return pick_kind_server(request, mode, module_has_semaphore, "semaphore", NATIVE_OPS)
