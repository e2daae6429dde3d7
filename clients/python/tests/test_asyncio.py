"""redislock.asyncio in both modes: the same API with await, owners per task, watchdog task."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio
from conftest import Server, lock_info

import redislock
import redislock.asyncio as ral


@pytest.fixture
async def ar(server: Server) -> AsyncIterator[redis.asyncio.Redis]:
    client = redis.asyncio.Redis(port=server.port)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
async def alocks(ar: redis.asyncio.Redis, server: Server) -> AsyncIterator[ral.LockClient]:
    client = ral.LockClient(ar, lease=5.0)
    assert await client.detect_mode() == ("module" if server.module else "lua")
    assert client.mode == ("module" if server.module else "lua")
    try:
        yield client
    finally:
        await client.close()


async def eventually(predicate, timeout: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if await predicate():
            return True
        await asyncio.sleep(0.01)
    return False


async def test_mode_before_any_await(server: Server) -> None:
    client = ral.LockClient(redis.asyncio.Redis(port=server.port))
    assert client.mode == ("module" if server.module else "lua")
    await client.close()


async def test_acquire_release_and_reads(alocks: ral.LockClient, ar: redis.asyncio.Redis) -> None:
    lock = alocks.lock("a:1")
    assert not await lock.locked() and await lock.ttl() is None
    assert await lock.acquire()
    assert await ar.hgetall("a:1") == {lock.owner.encode(): b"1"}
    assert lock.owner.startswith(alocks.id + ":")
    assert await lock.locked() and await lock.owned() and await lock.hold_count() == 1
    ttl = await lock.ttl()
    assert ttl is not None and 4 < ttl <= 5
    assert await lock.acquire(blocking=False)
    assert await lock.hold_count() == 2
    await lock.release()
    await lock.release()
    assert await ar.exists("a:1") == 0
    with pytest.raises(redislock.NotOwnedError):
        await lock.release()


async def test_tasks_are_owners(alocks: ral.LockClient, ar: redis.asyncio.Redis, server: Server) -> None:
    lock = alocks.lock("a:tasks")
    async with lock:
        # a second task on the same thread is another owner: it has to wait (the owner is the
        # task that calls acquire(), so the call is made inside the new task)
        async def in_other_task() -> bool:
            return await lock.acquire(timeout=10)

        other = asyncio.create_task(in_other_task())
        if server.module:
            assert await eventually(lambda: _waiters(ar, "a:tasks"))
        else:
            assert await eventually(lambda: _subscribed(ar, "redisson_lock__channel:{a:tasks}"))
        assert not other.done()
        mine = lock.owner
    assert await asyncio.wait_for(other, 10) is True
    owners = list(await ar.hgetall("a:tasks"))
    assert len(owners) == 1 and owners[0] != mine.encode()


async def _waiters(ar: redis.asyncio.Redis, key: str) -> bool:
    reply = await ar.execute_command("LOCK.INFO", key)
    return bool(reply) and dict(reply if isinstance(reply, dict) else zip(reply[::2], reply[1::2]))[b"waiters"] == 1


async def _subscribed(ar: redis.asyncio.Redis, channel: str) -> bool:
    return bool((await ar.pubsub_numsub(channel))[0][1] == 1)


async def test_timeout_and_pinned_owner(alocks: ral.LockClient, ar: redis.asyncio.Redis) -> None:
    holder = alocks.lock("a:busy", owner="holder")
    assert await holder.acquire(lease=2)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await alocks.lock("a:busy").acquire(timeout=0.3) is False
    assert 0.25 < loop.time() - started < 2
    assert await alocks.lock("a:busy").acquire(blocking=False) is False
    await holder.release()
    assert await ar.exists("a:busy") == 0


async def test_cancelled_wait_leaves_no_waiter(module_server: Server) -> None:
    ar = redis.asyncio.Redis(port=module_server.port)
    locks = ral.LockClient(ar)
    try:
        await ar.flushall()
        assert await locks.lock("a:cancel", owner="holder").acquire()
        waiter = asyncio.create_task(locks.lock("a:cancel", owner="w").acquire())
        assert await eventually(lambda: _waiters(ar, "a:cancel"))
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        with module_server.client() as r:
            assert await eventually(lambda: _no_waiters(r))
    finally:
        await locks.close()
        await ar.aclose()


async def _no_waiters(r: object) -> bool:
    return lock_info(r, "a:cancel").get("waiters") == 0  # type: ignore[arg-type]


async def test_fencing(alocks: ral.LockClient) -> None:
    lock = alocks.lock("a:fence", fenced=True)
    tokens = []
    for _ in range(3):
        async with lock:
            tokens.append(lock.token)
        assert lock.token is None
    assert all(t is not None for t in tokens) and tokens == sorted(tokens) and len(set(tokens)) == 3


async def test_watchdog_task_renews_and_reports_loss(ar: redis.asyncio.Redis, server: Server) -> None:
    lost = asyncio.Event()
    calls: list[object] = []

    async def on_lost(lock: object) -> None:
        calls.append(lock)
        lost.set()

    locks = ral.LockClient(ar, lease=0.6)
    try:
        lock = locks.lock("a:wd", on_lost=on_lost)
        assert await lock.acquire()
        await asyncio.sleep(1.5)
        assert await ar.pttl("a:wd") > 200 and await lock.owned()
        if server.module:
            await ar.execute_command("LOCK.FORCERELEASE", "a:wd")
        else:
            await ar.delete("a:wd")
        await asyncio.wait_for(lost.wait(), 3)
        await asyncio.sleep(0.5)
        assert calls == [lock]
        assert not await lock.owned()
        with pytest.raises(redislock.NotOwnedError):
            await lock.release()
    finally:
        await locks.close()
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "redislock-watchdog"]


async def test_sync_replicas_without_replica(alocks: ral.LockClient, ar: redis.asyncio.Redis) -> None:
    lock = alocks.lock("a:sync", sync_replicas=1, sync_timeout=0.2)
    with pytest.raises(redislock.ReplicaSyncError) as failure:
        await lock.acquire()
    assert (failure.value.acked, failure.value.wanted) == (0, 1)
    assert await ar.exists("a:sync") == 0


async def test_force_release_and_errors(alocks: ral.LockClient, ar: redis.asyncio.Redis) -> None:
    assert await alocks.lock("a:f", owner="x").acquire()
    assert await alocks.lock("a:f").force_release() is True
    assert await ar.exists("a:f") == 0
    assert await alocks.lock("a:f").force_release() is False
    await ar.set("a:str", "v")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        await alocks.lock("a:str").acquire()
