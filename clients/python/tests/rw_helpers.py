"""Shared pieces of the read-write lock tests: the servers of both modes (module mode skipped
when the module has no read-write commands) and a "Redisson-script client": raw EVAL of our
rw-*.lua op files with Redisson's KEYS/ARGV, as a Redisson 3.44+ client sends them."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import redis
from conftest import lua_script
from kind_helpers import pick_server as pick_kind_server
from kind_helpers import prefixed, register_native, suffixed
from servers import LUA_DIR, Server


def module_has_rwlock(server: Server) -> bool:
    with server.client() as r:
        try:
            r.execute_command("LOCK.ACQUIRE", "__rw_probe__", "probe", 1000, "READ")
        except redis.ResponseError:
            return False
        finally:
            r.delete("__rw_probe__", "{__rw_probe__}:probe:rwlock_timeout:1")
    return True


RW_OPS = sorted(p.stem for p in LUA_DIR.glob("rw-*.lua") if not p.stem.endswith(("-release", "-fenced-acquire")))


def native_runs(r: redis.Redis) -> int:
    """How many read-write scripts ran natively (INFO lock)."""
    info = r.info("lock")
    return sum(int(v) for k, v in info.items() if k.startswith("lock_redisson_rw_") and k.endswith("_native"))


class ScriptClient:
    """One Redisson thread (``<uuid>:<thread id>``) using the read-write lock through the
    scripts Redisson 3.44+ sends (our own Lua, Redisson's KEYS/ARGV and replies)."""

    def __init__(self, r: redis.Redis, name: str, thread: int = 1) -> None:
        self.r = r
        self.name = name
        self.owner = f"{uuid.uuid4()}:{thread}"
        self.channel = prefixed("redisson_rwlock", name)

    def _eval(self, op: str, keys: list[str], args: list[Any]) -> Any:
        return self.r.eval(lua_script(op), len(keys), *keys, *args)

    def _latch(self) -> str:
        return prefixed("redisson_unlock_latch", self.name) + ":" + uuid.uuid4().hex

    def read_lock(self, lease_ms: int = 30000) -> Any:
        prefix = suffixed(self.name, f"{self.owner}:rwlock_timeout")
        return self._eval("rw-read-acquire", [self.name, prefix], [lease_ms, self.owner, self.owner + ":write"])

    def write_lock(self, lease_ms: int = 30000) -> Any:
        return self._eval("rw-write-acquire", [self.name], [lease_ms, self.owner + ":write"])

    def read_unlock(self) -> Any:
        latch = self._latch()
        keys = [self.name, self.channel, suffixed(self.name, f"{self.owner}:rwlock_timeout"), suffixed(self.name, "")]
        keys[3] = keys[3][:-1]  # the hold-key prefix: '{name}' (or 'name')
        reply = self._eval("rw-read-unlock-latch-nil", [*keys, latch], [0, self.owner, "PUBLISH", 13500])
        self.r.delete(latch)
        return reply

    def write_unlock(self, lease_ms: int = 30000) -> Any:
        latch = self._latch()
        reply = self._eval(
            "rw-write-unlock-latch-nil",
            [self.name, self.channel, latch],
            [1, lease_ms, self.owner + ":write", "PUBLISH", 13500],
        )
        self.r.delete(latch)
        return reply


def native_scripts(server: Server) -> bool:
    """Our Lua of the read-write lock's operations run natively on `server`."""
    return register_native(server, RW_OPS)


def pick_server(request: pytest.FixtureRequest, mode: str) -> Server:
    return pick_kind_server(request, mode, module_has_rwlock, "read-write lock", RW_OPS)
