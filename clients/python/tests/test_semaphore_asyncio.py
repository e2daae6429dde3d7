"""redislock.asyncio's semaphore in both modes: permits set before first use, acquire as an
awaitable and an async context manager, timeouts and cancellations that leave nothing held,
watchdog and lost permits, interop with a Redisson-script client, stress."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Iterator

import pytest
import redis
import redis.asyncio
from sem_helpers import ScriptClient, available, held, now_ms, pick_server, zset
from servers import Server

import redislock
import redislock.asyncio as ral

NAME = "pool"


@pytest.fixture(params=["module", "lua"])
def sem_server(request: pytest.FixtureRequest) -> Server:
    return pick_server(request, request.param)


@pytest.fixture
def r(sem_server: Server) -> Iterator[redis.Redis]:
    client = sem_server.client()
    try:
        yield client
    finally:
        client.close()


async def _close(ar: redis.asyncio.Redis) -> None:
    await ar.aclose() if hasattr(ar, "aclose") else await ar.close()


@pytest.fixture
async def alocks(sem_server: Server) -> AsyncIterator[ral.LockClient]:
    ar = redis.asyncio.Redis(port=sem_server.port)
    client = ral.LockClient(ar, lease=5.0)
    assert await client.detect_mode() == ("module" if sem_server.module else "lua")
    try:
        yield client
    finally:
        await client.close()
        await _close(ar)


def settled(r: redis.Redis, total: int, name: str = NAME) -> bool:
    return available(r, name) == total and held(r, name) == 0


async def eventually(predicate: object, timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        await asyncio.sleep(0.02)
    return bool(predicate())  # type: ignore[operator]


async def test_basics(alocks: ral.LockClient, r: redis.Redis) -> None:
    sem = alocks.semaphore(NAME, permits=4)
    assert r.exists(NAME) == 0  # set before the object's first command, not at construction
    assert await sem.available() == 4 and r.get(NAME) == b"4"
    assert await sem.detect_mode() == await alocks.detect_mode()
    assert await alocks.semaphore(NAME, permits=8).available() == 4
    assert await sem.try_set_permits(9) is False

    p = await sem.acquire(2)
    assert isinstance(p, ral.Permit) and len(p.ids) == 2 and all(len(i) == 16 for i in p.ids)
    assert await p.owned() and await sem.available() == 2
    async with sem.acquire(2) as q:
        assert await sem.available() == 0
        assert await sem.try_acquire() is None
        assert set(r.zrange(zset(NAME), 0, -1)) == {*p.ids, *q.ids}
    assert q.released and not await q.owned()
    await sem.release(p)
    assert p.released and settled(r, 4)
    with pytest.raises(redislock.NotOwnedError):
        await p.release()  # exactly once
    async with await sem.acquire() as one:
        assert held(r, NAME) == 1
    with pytest.raises(redislock.NotOwnedError):
        await one.release()

    await sem.set_permits(6)
    assert await sem.available() == 6
    got = await sem.try_acquire(7)
    assert got is None and held(r, NAME) == 0  # all or none

    # Tasks share permits freely: taken in one task, released in another.
    taken = await asyncio.create_task(sem.acquire(3))
    await asyncio.create_task(taken.release())
    assert settled(r, 6)


async def test_arguments_are_checked_when_called(alocks: ral.LockClient) -> None:
    sem = alocks.semaphore(NAME)
    for permits in (0, -1, True, 1.5, 100_001):
        with pytest.raises(ValueError):
            sem.acquire(permits)
        with pytest.raises(ValueError):
            sem.try_acquire(permits)
    for timeout in (-1, float("nan"), float("inf"), 1e9):
        with pytest.raises(ValueError):
            sem.acquire(timeout=timeout)
    for lease in (0, -1, float("inf")):
        with pytest.raises(ValueError):
            sem.acquire(lease=lease)
    with pytest.raises(ValueError):
        sem.set_permits(-1)
    with pytest.raises(ValueError):
        alocks.semaphore(NAME, permits=2**53)


async def test_timeouts_and_cancellation_leave_nothing_held(alocks: ral.LockClient, r: redis.Redis) -> None:
    sem = alocks.semaphore(NAME, permits=2)
    holder = await sem.acquire(2)
    t0 = time.monotonic()
    with pytest.raises(redislock.LockTimeout):
        await sem.acquire(timeout=0.2)
    assert await sem.try_acquire(timeout=0.2) is None
    assert time.monotonic() - t0 < 2
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(sem.acquire(), 0.3)
    task = asyncio.create_task(sem.acquire(2))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await holder.release()
    await asyncio.sleep(0.3)
    # Nothing was granted to the cancelled or timed-out waiters behind the client's back.
    assert settled(r, 2), (r.get(NAME), r.zrange(zset(NAME), 0, -1))

    holder = await sem.acquire(2)
    waiter = asyncio.create_task(sem.acquire(1, timeout=5))
    await asyncio.sleep(0.1)
    t0 = time.monotonic()
    await holder.release()
    p = await waiter
    assert time.monotonic() - t0 < 2
    await p.release()
    assert settled(r, 2)


async def test_cancellation_racing_the_grant(alocks: ral.LockClient, r: redis.Redis) -> None:
    """Cancelled at any moment around the grant: the waiter has the permit (and gives it back),
    or nothing is held once the client has settled (its ids released, twice)."""
    sem = alocks.semaphore(NAME, permits=2)
    outcomes: set[str] = set()
    for trial in range(20):
        holder = await sem.acquire(2)
        waiter = asyncio.create_task(sem.acquire(2))
        await asyncio.sleep(0.05)
        release = asyncio.create_task(holder.release())
        await asyncio.sleep(random.uniform(0, 0.004) * (trial % 5))
        waiter.cancel()
        await release
        try:
            p = await waiter
        except asyncio.CancelledError:
            outcomes.add("cancelled")
        else:
            outcomes.add("granted")
            await p.release()
        assert await eventually(lambda: settled(r, 2), timeout=3), (trial, r.get(NAME), r.zcard(zset(NAME)))
    await asyncio.sleep(1.5)  # the watchdog's second release finds nothing to take back
    assert settled(r, 2)
    assert "cancelled" in outcomes


async def test_watchdog_and_lost(sem_server: Server, r: redis.Redis) -> None:
    lost: list[object] = []
    ar = redis.asyncio.Redis(port=sem_server.port)
    async with ral.LockClient(ar, lease=1.0) as alocks:
        sem = alocks.semaphore(NAME, permits=3, on_lost=lost.append)
        kept = await sem.acquire(2)
        fixed = await sem.acquire(1, lease=0.3)
        await asyncio.sleep(2.5)
        assert await kept.owned() and not await fixed.owned()
        for _, score in r.zrange(zset(NAME), 0, -1, withscores=True):
            assert now_ms() < score <= now_ms() + 1100
        assert await sem.available() == 1  # the fixed lease ran out; the kept permits did not
        with pytest.raises(redislock.NotOwnedError):
            await fixed.release()
        r.zrem(zset(NAME), kept.ids[1])
        assert await eventually(lambda: lost == [kept])
        assert not await kept.owned()
        with pytest.raises(redislock.NotOwnedError):
            await kept.release()
        assert held(r, NAME) == 0
        assert lost == [kept]  # the fixed-lease permit is not watched: never reported
    await _close(ar)


async def test_interop_with_a_script_client(alocks: ral.LockClient, r: redis.Redis) -> None:
    script = ScriptClient(r, NAME)
    assert script.try_set_permits(3) == 1
    reply, ids = script.try_acquire(3, lease_ms=30_000)
    assert reply == b"OK"
    sem = alocks.semaphore(NAME)
    waiter = asyncio.create_task(sem.acquire(2, timeout=10))
    await asyncio.sleep(0.2)
    assert script.release(ids[:2]) == 2
    t0 = time.monotonic()
    p = await waiter
    assert time.monotonic() - t0 < 2
    assert script.available() == 0
    reply, _ = script.try_acquire(1)
    assert isinstance(reply, bytes) and reply.startswith(b":")  # our permits have a lease
    await p.release()
    assert script.available() == 2
    assert script.release(ids[2:]) == 1
    assert settled(r, 3)


async def test_stress(alocks: ral.LockClient, r: redis.Redis) -> None:
    sem = alocks.semaphore("stress", permits=4)
    state = {"holders": 0, "grants": 0}
    errors: list[int] = []
    stop = time.monotonic() + 2.0

    async def worker(n: int) -> None:
        while time.monotonic() < stop:
            want = 1 + n % 2
            async with sem.acquire(want, timeout=20):
                state["holders"] += want
                state["grants"] += 1
                if state["holders"] > 4:
                    errors.append(state["holders"])
                await asyncio.sleep(0.002)
                state["holders"] -= want
            await asyncio.sleep(0.001)

    await asyncio.gather(*(worker(n) for n in range(16)))
    assert errors == []
    assert state["grants"] > 16
    assert await sem.available() == 4 and settled(r, 4, "stress")
