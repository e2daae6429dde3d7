"""redislock.asyncio in both modes: per-task owners, waiting, watchdog, fencing, replicas,
MultiLock/RedLock."""

from __future__ import annotations

import asyncio
import signal
import time

import pytest
import redis.asyncio

import redislock
import redislock.asyncio as alock


def aclient(server):  # type: ignore[no-untyped-def]
    return redis.asyncio.Redis(port=server.port, socket_timeout=10)


async def test_acquire_release_and_task_owners(server, mode) -> None:
    locks = alock.LockClient(aclient(server))
    assert await locks.detect() == mode and locks.mode == mode
    lock = locks.lock("a")
    assert await lock.acquire()
    assert await lock.acquire(blocking=False), "the same task re-enters"
    assert await lock.hold_count() == 2
    other = await asyncio.create_task(lock.acquire(blocking=False))
    assert other is False, "another task is another owner"
    await lock.release()
    await lock.release()
    assert not await lock.locked()
    with pytest.raises(redislock.NotOwnedError):
        await lock.release()
    async with lock:
        assert await lock.owned()
        assert 29 < (await lock.ttl() or 0) <= 30
    assert await lock.ttl() is None
    await locks.close()


async def test_mode_property_before_any_call(server, mode) -> None:
    locks = alock.LockClient(aclient(server))
    assert locks.mode == mode
    await locks.close()


async def test_waiting_and_timeouts(server) -> None:
    locks = alock.LockClient(aclient(server))
    holder = locks.lock("w", owner="holder")
    assert await holder.acquire()
    lock = locks.lock("w")
    t0 = time.monotonic()
    assert await lock.acquire(timeout=0.3) is False
    assert time.monotonic() - t0 >= 0.25
    waiter = asyncio.create_task(lock.acquire(timeout=10))
    await asyncio.sleep(0.2)
    assert not waiter.done()
    await holder.release()
    assert await asyncio.wait_for(waiter, 10) is True
    assert await lock.force_release()
    with pytest.raises(ValueError):
        await lock.acquire(timeout=-1)
    with pytest.raises(ValueError):
        await lock.acquire(lease=0)
    await locks.close()


async def test_watchdog_renews_and_detects_loss(server) -> None:
    lost = []
    locks = alock.LockClient(aclient(server), lease=0.5)
    lock = locks.lock("wd", on_lost=lost.append)
    assert await lock.acquire()
    await asyncio.sleep(1.3)
    assert await lock.owned()
    server.client().delete("wd")
    end = time.monotonic() + 5
    while not lost and time.monotonic() < end:
        await asyncio.sleep(0.02)
    assert lost == [lock]
    assert not await lock.owned()
    with pytest.raises(redislock.NotOwnedError):
        await lock.release()
    await locks.close()


async def test_fencing_tokens(server) -> None:
    locks = alock.LockClient(aclient(server))
    lock = locks.lock("f", fenced=True)
    tokens = []
    for _ in range(10):
        assert await lock.acquire()
        tokens.append(lock.token)
        await lock.release()
    assert tokens == sorted(tokens) and len(set(tokens)) == 10
    await locks.close()


async def test_sync_replicas(make_server, mode) -> None:
    master = make_server(mode == "module")
    replica = make_server(False)
    replica.replicate_from(master)
    locks = alock.LockClient(aclient(master))
    lock = locks.lock("d", sync_replicas=1, sync_timeout=0.5)
    assert await lock.acquire()
    await lock.release()
    replica.signal(signal.SIGSTOP)
    try:
        with pytest.raises(redislock.ReplicaSyncError):
            await lock.acquire()
        assert not master.client().exists("d")
    finally:
        replica.signal(signal.SIGCONT)
    await locks.close()


async def test_multilock_and_redlock(make_server, mode) -> None:
    servers = [make_server(mode == "module") for _ in range(3)]
    clients = [alock.LockClient(aclient(s)) for s in servers]
    m = alock.MultiLock([c.lock("r") for c in clients])
    async with m:
        assert all(s.client().exists("r") for s in servers)
    assert not any(s.client().exists("r") for s in servers)
    servers[2].stop()
    r = alock.RedLock([c.lock("r") for c in clients])
    assert await r.acquire(blocking=False)
    assert servers[0].client().exists("r") and servers[1].client().exists("r")
    await r.release()
    assert await alock.MultiLock([c.lock("r2") for c in clients]).acquire(blocking=False) is False
    for c in clients[:2]:
        await c.close()
