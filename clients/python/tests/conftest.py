"""Real redis-server processes for the tests: on free loopback ports, in temporary directories,
with the redis-lock module (``LOCK_MODULE``, default ``<repo>/target/release/libredis_lock.so``)
or without it; always killed and removed, even when a test fails."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from servers import LUA_DIR, MODULE_PATH, Server, free_port

import redislock

__all__ = ["MODULE_PATH", "Server", "free_port", "lock_info", "lua_script", "wait_until"]


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    """Start servers for one test with ``servers.append(Server(...))``; all closed afterwards."""
    started: list[Server] = []
    try:
        yield started
    finally:
        for server in started:
            server.close()


@pytest.fixture(scope="session")
def module_server() -> Iterator[Server]:
    server = Server(module=True)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def native_server() -> Iterator[Server]:
    """A module server on which the tests turn on `lock.redisson-scripts native`."""
    server = Server(module=True)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def plain_server() -> Iterator[Server]:
    server = Server(module=False)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(params=["module", "lua"])
def server(request: pytest.FixtureRequest, module_server: Server, plain_server: Server) -> Server:
    """The shared server of a mode (emptied): lua mode runs where the module is not loaded."""
    chosen = module_server if request.param == "module" else plain_server
    with chosen.client() as r:
        r.flushall()
        r.script_flush()
    return chosen


@pytest.fixture
def r(server: Server) -> Iterator[redis.Redis]:
    client = server.client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def locks(r: redis.Redis, server: Server) -> Iterator[redislock.LockClient]:
    client = redislock.LockClient(r, lease=5.0)
    assert client.mode == ("module" if server.module else "lua")
    try:
        yield client
    finally:
        client.close()


def wait_until(predicate: Any, timeout: float = 5.0, interval: float = 0.01) -> bool:
    """Poll ``predicate`` until true or ``timeout``: for state with no reply to await."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def lua_script(name: str) -> str:
    return (LUA_DIR / f"{name}.lua").read_text()


def lock_info(r: redis.Redis, key: str) -> dict[str, Any]:
    """LOCK.INFO as a dict with str keys (RESP2 flat array or RESP3 map)."""
    reply = r.execute_command("LOCK.INFO", key)
    if reply is None:
        return {}
    items = dict(zip(reply[::2], reply[1::2])) if isinstance(reply, list) else reply
    return {k.decode() if isinstance(k, bytes) else k: v for k, v in items.items()}
