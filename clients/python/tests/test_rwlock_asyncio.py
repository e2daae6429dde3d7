"""redislock.asyncio's read-write lock in both modes: owners per task, cancellation and
timeouts that leave no hold behind, watchdog, fencing, interop with a Redisson-script client."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator

import pytest
import redis
import redis.asyncio
from rw_helpers import ScriptClient, pick_server
from servers import Server

import redislock
import redislock.asyncio as ral

NAME = "catalog"


@pytest.fixture(params=["module", "lua"])
def rw_server(request: pytest.FixtureRequest) -> Server:
    return pick_server(request, request.param)


@pytest.fixture
def r(rw_server: Server) -> Iterator[redis.Redis]:
    client = rw_server.client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
async def alocks(rw_server: Server) -> AsyncIterator[ral.LockClient]:
    ar = redis.asyncio.Redis(port=rw_server.port)
    client = ral.LockClient(ar, lease=5.0)
    assert await client.detect_mode() == ("module" if rw_server.module else "lua")
    try:
        yield client
    finally:
        await client.close()
        await ar.aclose() if hasattr(ar, "aclose") else await ar.close()


def fields(r: redis.Redis, name: str = NAME) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in r.hgetall(name).items()}


async def test_basics(alocks: ral.LockClient, r: redis.Redis) -> None:
    rw = alocks.rwlock(NAME)
    async with rw.read:
        assert await rw.read.acquire()
        assert await rw.read.hold_count() == 2
        assert await rw.read.locked() and not await rw.write.locked()
        assert fields(r) == {"mode": "read", rw.read.owner: "2"}
        await rw.read.release()

        # Another task is another owner: it may read, not write.
        async def try_in_task(lock: ral.Lock) -> bool:
            return await lock.acquire(blocking=False)

        assert await asyncio.create_task(try_in_task(rw.read))
        assert not await asyncio.create_task(try_in_task(rw.write))
        assert await rw.write.acquire(blocking=False) is False  # no upgrade
        with pytest.raises(redislock.UpgradeError):
            await rw.write.acquire(timeout=2)
    r.delete(NAME)
    async with rw.write:
        assert await rw.read.acquire()  # downgrade
        assert await rw.write.owned()
    assert fields(r) == {"mode": "read", rw.read.owner: "1"}
    await rw.read.release()
    assert not r.exists(NAME)
    with pytest.raises(redislock.NotOwnedError):
        await rw.write.release()


async def test_waiting_and_cancellation_leave_no_hold(alocks: ral.LockClient, r: redis.Redis) -> None:
    holder = alocks.rwlock(NAME, owner="holder")
    await holder.write.acquire()
    rw = alocks.rwlock(NAME)
    assert await rw.read.acquire(timeout=0.2) is False
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(rw.read.acquire(), 0.3)
    task = asyncio.create_task(rw.write.acquire())
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await holder.write.release()
    await asyncio.sleep(0.3)
    # Nothing of the cancelled waiters was granted behind the client's back.
    assert not r.exists(NAME), fields(r)

    await holder.write.acquire()
    waiter = asyncio.create_task(rw.read.acquire(timeout=5))
    await asyncio.sleep(0.1)
    t0 = time.monotonic()
    await holder.write.release()
    assert await waiter
    assert time.monotonic() - t0 < 2
    assert fields(r) == {"mode": "read", rw.read.owner: "1"}


async def test_watchdog_and_lost(rw_server: Server, r: redis.Redis) -> None:
    lost: list[object] = []
    ar = redis.asyncio.Redis(port=rw_server.port)
    async with ral.LockClient(ar, lease=1.0) as alocks:
        rw = alocks.rwlock(NAME, on_lost=lost.append)
        await rw.read.acquire()
        w = alocks.rwlock("other", on_lost=lost.append)
        await w.write.acquire()
        await asyncio.sleep(2.5)
        assert await rw.read.owned() and await w.write.owned()
        assert r.pttl(f"{{{NAME}}}:{rw.read.owner}:rwlock_timeout:1") > 0
        r.delete(NAME, "other")
        deadline = time.monotonic() + 3
        while len(lost) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert set(map(id, lost)) == {id(rw.read), id(w.write)}
        with pytest.raises(redislock.NotOwnedError):
            await rw.read.release()
    await ar.aclose() if hasattr(ar, "aclose") else await ar.close()


async def test_fenced_and_interop(alocks: ral.LockClient, r: redis.Redis) -> None:
    rw = alocks.rwlock(NAME, fenced=True)
    async with rw.write:
        first = rw.write.token
    async with rw.write:
        second = rw.write.token
    assert first is not None and second is not None and second > first
    assert rw.read.token is None

    script = ScriptClient(r, NAME)
    assert script.write_lock() is None
    waiter = asyncio.create_task(rw.read.acquire(timeout=10))
    await asyncio.sleep(0.2)
    assert script.write_unlock() == 1
    t0 = time.monotonic()
    assert await waiter
    assert time.monotonic() - t0 < 2
    assert script.read_lock() is None
    await rw.read.release()
    assert script.read_unlock() == 1
    assert not r.exists(NAME)


async def test_stress(alocks: ral.LockClient, r: redis.Redis) -> None:
    rw = alocks.rwlock("stress")
    state = {"readers": 0, "writers": 0, "writes": 0}
    errors: list[dict[str, int]] = []
    stop = time.monotonic() + 2.0

    async def reader() -> None:
        while time.monotonic() < stop:
            async with rw.read:
                state["readers"] += 1
                if state["writers"]:
                    errors.append(dict(state))
                await asyncio.sleep(0.002)
                state["readers"] -= 1
            await asyncio.sleep(0.005)

    async def writer() -> None:
        while time.monotonic() < stop:
            async with rw.write:
                state["writers"] += 1
                state["writes"] += 1
                if state["writers"] > 1 or state["readers"]:
                    errors.append(dict(state))
                await asyncio.sleep(0.002)
                state["writers"] -= 1
            await asyncio.sleep(0.001)

    await asyncio.gather(*(reader() for _ in range(8)), *(writer() for _ in range(2)))
    assert errors == []
    assert state["writes"] >= 2
    assert not r.exists("stress")
