"""MultiLock and RedLock over three independent servers, blocking and asyncio."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio
from conftest import Server, lock_info, wait_until
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

import redislock
import redislock.asyncio as ral


@pytest.fixture(params=["module", "lua"])
def trio(request: pytest.FixtureRequest, servers: list[Server]) -> list[Server]:
    for _ in range(3):
        servers.append(Server(module=request.param == "module"))
    return servers


@pytest.fixture
def clients(trio: list[Server]) -> Iterator[list[redislock.LockClient]]:
    # Redlock wants components that fail fast: short timeouts, no reconnect retries
    made = [redislock.LockClient(s.client(**FAST_FAIL), lease=0.9) for s in trio]
    try:
        yield made
    finally:
        for client in made:
            client.close()


FAST_FAIL = {"socket_timeout": 2, "socket_connect_timeout": 1, "retry": Retry(NoBackoff(), 0)}


ASYNC_FAST_FAIL = {**FAST_FAIL, "retry": AsyncRetry(NoBackoff(), 0)}


def raw(server: Server) -> redis.Redis:
    return server.client(socket_timeout=2)


def test_all_or_nothing(trio: list[Server], clients: list[redislock.LockClient]) -> None:
    m = redislock.MultiLock([c.lock("k") for c in clients])
    assert m.acquire()
    for server, client in zip(trio, clients):
        assert raw(server).hgetall("k") == {client.lock("k").owner.encode(): b"1"}
    time.sleep(1.2)  # longer than the 0.9 s lease: the watchdogs renew every component
    assert all(raw(s).exists("k") == 1 for s in trio)
    m.release()
    assert all(raw(s).exists("k") == 0 for s in trio)
    with pytest.raises(redislock.NotOwnedError):
        m.release()
    with redislock.MultiLock([c.lock("ctx") for c in clients]):
        assert all(raw(s).exists("ctx") == 1 for s in trio)
    assert all(raw(s).exists("ctx") == 0 for s in trio)


def test_one_component_busy(trio: list[Server], clients: list[redislock.LockClient]) -> None:
    assert clients[1].lock("busy", owner="other").acquire(lease=5)
    m = redislock.MultiLock([c.lock("busy") for c in clients])
    assert m.acquire(blocking=False) is False
    assert m.acquire(timeout=0.3) is False
    # what the attempts took elsewhere was given back
    assert raw(trio[0]).exists("busy") == 0 and raw(trio[2]).exists("busy") == 0
    r = redislock.RedLock([c.lock("busy") for c in clients])
    assert r.acquire(blocking=False) is True  # 2 of 3
    assert r.validity is not None and 0 < r.validity < 0.9
    r.release()
    assert raw(trio[0]).exists("busy") == 0 and raw(trio[1]).hgetall("busy") == {b"other": b"1"}


def test_one_server_down(trio: list[Server], clients: list[redislock.LockClient]) -> None:
    trio[2].kill()
    m = redislock.MultiLock([c.lock("down") for c in clients])
    started = time.monotonic()
    assert m.acquire(timeout=0.5) is False
    assert time.monotonic() - started < 3
    assert raw(trio[0]).exists("down") == 0 and raw(trio[1]).exists("down") == 0
    r = redislock.RedLock([c.lock("down") for c in clients])
    assert r.acquire(lease=2.0) is True
    assert r.validity is not None and 0 < r.validity <= 2.0 - 0.022
    assert 1000 < raw(trio[0]).pttl("down") <= 2000
    r.release()  # only what was taken: no error for the dead server
    assert raw(trio[0]).exists("down") == 0 and raw(trio[1]).exists("down") == 0


def test_release_continues_past_errors(trio: list[Server], clients: list[redislock.LockClient]) -> None:
    m = redislock.MultiLock([c.lock("part", owner="o") for c in clients])
    assert m.acquire(lease=5)
    raw(trio[0]).delete("part")
    with pytest.raises(redislock.NotOwnedError):
        m.release()
    assert raw(trio[1]).exists("part") == 0 and raw(trio[2]).exists("part") == 0


def test_components_wait_in_parallel(servers: list[Server]) -> None:
    for _ in range(3):
        servers.append(Server(module=True))
    clients = [redislock.LockClient(s.client()) for s in servers]
    try:
        holders = [c.lock("par", owner="holder") for c in clients]
        assert all(h.acquire(lease=10) for h in holders)
        result: list[bool] = []
        m = redislock.MultiLock([c.lock("par", owner="multi") for c in clients])
        t = threading.Thread(target=lambda: result.append(m.acquire(timeout=10)))
        t.start()
        # all three components wait at the same time, each in its server's queue
        assert wait_until(lambda: all(lock_info(raw(s), "par").get("waiters") == 1 for s in servers))
        for h in holders:
            h.release()
        t.join(timeout=10)
        assert result == [True]
        assert all(raw(s).hgetall("par") == {b"multi": b"1"} for s in servers)
    finally:
        for c in clients:
            c.close()


def test_async_multi_and_redlock(trio: list[Server]) -> None:
    async def main() -> None:
        made = [redis.asyncio.Redis(port=s.port, **ASYNC_FAST_FAIL) for s in trio]
        clients = [ral.LockClient(r, lease=0.9) for r in made]
        try:
            m = ral.MultiLock([c.lock("am") for c in clients])
            async with m:
                assert [await r.exists("am") for r in made] == [1, 1, 1]
                await asyncio.sleep(1.2)  # renewed by each client's watchdog task
                assert [await r.exists("am") for r in made] == [1, 1, 1]
            assert [await r.exists("am") for r in made] == [0, 0, 0]
            trio[1].kill()
            assert await ral.MultiLock([c.lock("am") for c in clients]).acquire(timeout=0.3) is False
            assert await made[0].exists("am") == 0
            red = ral.RedLock([c.lock("am") for c in clients])
            assert await red.acquire(lease=1.0) is True
            assert red.validity is not None and 0 < red.validity < 1.0
            assert await made[0].exists("am") == 1 and await made[2].exists("am") == 1
            await red.release()
            assert await made[0].exists("am") == 0 and await made[2].exists("am") == 0
        finally:
            for c in clients:
                await c.close()
            for r in made:
                await r.aclose()

    asyncio.run(main())
