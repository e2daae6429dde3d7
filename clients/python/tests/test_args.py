"""Bad arguments raise ValueError before anything is sent."""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import pytest
import redis
import redis.asyncio
from conftest import Server

import redislock
import redislock.asyncio


def commands_processed(r: redis.Redis) -> int:
    return int(r.info("stats")["total_commands_processed"])


BAD_CALLS: list[tuple[str, Callable[[Any], Any]]] = [
    ("empty name", lambda c: c.lock("")),
    ("name not a str", lambda c: c.lock(None)),
    ("timeout without blocking", lambda c: c.lock("k").acquire(blocking=False, timeout=1)),
    ("empty owner", lambda c: c.lock("k", owner="")),
    ("negative sync_replicas", lambda c: c.lock("k", sync_replicas=-1)),
    ("zero sync_timeout", lambda c: c.lock("k", sync_replicas=1, sync_timeout=0)),
    ("negative timeout", lambda c: c.lock("k").acquire(timeout=-1)),
    ("NaN timeout", lambda c: c.lock("k").acquire(timeout=float("nan"))),
    ("negative lease", lambda c: c.lock("k").acquire(lease=-1)),
    ("zero lease", lambda c: c.lock("k").acquire(lease=0)),
    ("infinite lease", lambda c: c.lock("k").acquire(lease=float("inf"))),
    ("lone surrogate name", lambda c: c.lock("k\udc80")),
    ("lone surrogate owner", lambda c: c.lock("k", owner="o\ud800")),
    ("sync_replicas out of range", lambda c: c.lock("k", sync_replicas=10**20)),
    ("zero max_hold", lambda c: c.lock("k", max_hold=0)),
    ("zero extend", lambda c: c.lock("k").extend(0)),
]


@pytest.mark.parametrize(("what", "call"), BAD_CALLS, ids=[b[0] for b in BAD_CALLS])
def test_value_errors_send_nothing(module_server: Server, what: str, call: Callable[[Any], Any]) -> None:
    r = module_server.client()
    client = redislock.LockClient(r, mode="module")
    before = commands_processed(r)
    with pytest.raises(ValueError):
        call(client)
    assert commands_processed(r) == before + 1  # only our own INFO
    client.close()
    r.close()


@pytest.mark.parametrize(("what", "call"), BAD_CALLS, ids=[b[0] for b in BAD_CALLS])
def test_value_errors_before_connecting(what: str, call: Callable[[Any], Any]) -> None:
    # a client of a port where nothing listens: any command would raise ConnectionError
    client = redislock.LockClient(redis.Redis(port=1), mode="lua")
    with pytest.raises(ValueError):
        call(client)


@pytest.mark.parametrize(("what", "call"), BAD_CALLS, ids=[b[0] for b in BAD_CALLS])
def test_async_value_errors_before_connecting(what: str, call: Callable[[Any], Any]) -> None:
    async def main() -> None:
        client = redislock.asyncio.LockClient(redis.asyncio.Redis(port=1), mode="lua")
        with pytest.raises(ValueError):
            result = call(client)
            if asyncio.iscoroutine(result):
                await result

    asyncio.run(main())


def test_client_arguments() -> None:
    r = redis.Redis(port=1)
    for lease in (0, -1, float("nan")):
        with pytest.raises(ValueError):
            redislock.LockClient(r, lease=lease)
    with pytest.raises(ValueError):
        redislock.LockClient(r, mode="fast")
    with pytest.raises(ValueError):
        redislock.MultiLock([])
