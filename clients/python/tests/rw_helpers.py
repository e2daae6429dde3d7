"""Shared pieces of the read-write lock tests: the servers of both modes (module mode skipped
when the module has no read-write commands) and a "Redisson-script client": raw EVAL of our
rw-*.lua op files with Redisson's KEYS/ARGV, as a Redisson 3.44+ client sends them."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import pytest
import redis
from conftest import lua_script
from servers import LUA_DIR, MODULE_PATH, Server


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


def native_scripts(server: Server) -> bool:
    """Run Redisson's read-write scripts natively on `server`: `lock.redisson-scripts native`,
    with our Lua's SHA1s registered under Redisson's operations (the path Redisson's own texts
    take). False when the module does not know the read-write operations."""
    bodies = {op: lua_script(op).encode() for op in RW_OPS}
    extra = ",".join(f"{op}:{hashlib.sha1(body).hexdigest()}:{len(body)}" for op, body in bodies.items())
    with server.client() as r:
        try:
            r.config_set("lock.redisson-extra-scripts", extra)
        except redis.ResponseError:
            return False
        r.config_set("lock.redisson-scripts", "native")
    return True


def native_runs(r: redis.Redis) -> int:
    """How many read-write scripts ran natively (INFO lock)."""
    info = r.info("lock")
    return sum(int(v) for k, v in info.items() if k.startswith("lock_redisson_rw_") and k.endswith("_native"))


def pick_server(request: pytest.FixtureRequest, mode: str) -> Server:
    if mode in ("module", "native"):
        if not MODULE_PATH.exists():
            pytest.skip(f"module not built: {MODULE_PATH}")
        server: Server = request.getfixturevalue("module_server" if mode == "module" else "native_server")
        if not module_has_rwlock(server):
            pytest.skip("the module has no read-write lock commands (LOCK.ACQUIRE ... READ)")
        if mode == "native" and not native_scripts(server):
            pytest.skip("the module does not run Redisson's read-write scripts natively")
    else:
        server = request.getfixturevalue("plain_server")
    with server.client() as r:
        r.flushall()
        r.script_flush()
    return server


def prefixed(prefix: str, name: str) -> str:
    return f"{prefix}:{name}" if "{" in name else f"{prefix}:{{{name}}}"


def suffixed(name: str, suffix: str) -> str:
    return f"{name}:{suffix}" if "{" in name else f"{{{name}}}:{suffix}"


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
