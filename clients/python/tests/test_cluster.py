"""RedisCluster (sync and asyncio): every command goes to the lock key's node, waiting works
(server-side with the module, sharded pub/sub without), sync_replicas asks the key's node."""

from __future__ import annotations

import threading
import time

import pytest
import redis.asyncio.cluster
from redis.cluster import RedisCluster

import redislock
import redislock.asyncio as alock

NAMES = ["orders:1", "orders:2", "{user:7}:lock", "inventory", "z"]


def test_cluster_locks_live_on_their_key_node(cluster, mode) -> None:
    rc = RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port, socket_timeout=10)
    locks = redislock.LockClient(rc)
    assert locks.mode == mode
    for name in NAMES:
        lock = locks.lock(name)
        assert lock.acquire()
        node = rc.get_node_from_key(name)
        assert rc.get_redis_connection(node).hexists(name, lock.owner), f"{name} on its node"
        assert lock.acquire(blocking=False) and lock.hold_count() == 2
        lock.release()
        lock.release()
        assert not lock.locked()
    locks.close()


def test_cluster_waiting_fencing_and_sync_replicas(cluster, mode) -> None:
    rc = RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port, socket_timeout=10)
    locks = redislock.LockClient(rc)
    holder = locks.lock("orders:9", owner="holder")
    assert holder.acquire()
    waiter = locks.lock("orders:9")
    got: list[bool] = []
    th = threading.Thread(target=lambda: got.append(waiter.acquire(timeout=10)))
    th.start()
    time.sleep(0.3)
    assert got == []
    holder.release()
    th.join(10)
    assert got == [True]
    assert waiter.force_release()
    fenced = locks.lock("tok", fenced=True)
    a = fenced.acquire() and fenced.token
    fenced.release()
    b = fenced.acquire() and fenced.token
    fenced.release()
    assert isinstance(a, int) and isinstance(b, int) and b > a
    # No replicas in this cluster: WAIT on the key's node answers 0.
    with pytest.raises(redislock.ReplicaSyncError):
        locks.lock("orders:9", sync_replicas=1, sync_timeout=0.1).acquire()
    assert not locks.lock("orders:9").locked()
    locks.close()


async def test_cluster_asyncio(cluster, mode) -> None:
    rc = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port, socket_timeout=10)
    locks = alock.LockClient(rc)
    assert await locks.detect() == mode
    for name in NAMES:
        lock = locks.lock(name, fenced=True)
        assert await lock.acquire()
        assert lock.token is not None
        await lock.release()
    holder = locks.lock("q", owner="holder")
    assert await holder.acquire()
    w = locks.lock("q")
    assert await w.acquire(timeout=0.2) is False
    import asyncio

    task = asyncio.create_task(w.acquire(timeout=10))
    await asyncio.sleep(0.2)
    await holder.release()
    assert await asyncio.wait_for(task, 10)
    assert await w.force_release()
    await locks.close()
    await rc.aclose()
