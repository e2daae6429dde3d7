"""A 3-master Redis Cluster with the module: every command goes to the lock key's node."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio.cluster
from conftest import Server, lock_info, wait_until
from redis.cluster import RedisCluster
from sem_helpers import module_has_semaphore

import redislock
import redislock.asyncio as ral


@pytest.fixture(scope="module")
def cluster() -> Iterator[list[Server]]:
    nodes: list[Server] = []
    try:
        for _ in range(3):
            nodes.append(
                Server(
                    True,
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "5000",
                )
            )
        subprocess.run(
            ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in nodes), "--cluster-yes"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        for n in nodes:
            with n.client() as r:
                assert wait_until(lambda r=r: r.cluster("info")["cluster_state"] == "ok", timeout=20)
        yield nodes
    finally:
        for n in nodes:
            n.close()


@pytest.fixture
def rc(cluster: list[Server]) -> Iterator[RedisCluster]:
    client = RedisCluster(host="127.0.0.1", port=cluster[0].port)
    client.flushall(target_nodes=RedisCluster.PRIMARIES)
    try:
        yield client
    finally:
        client.close()


def node_of(rc: RedisCluster, cluster: list[Server], key: str) -> Server:
    port = int(rc.get_node_from_key(key).port)
    return next(n for n in cluster if n.port == port)


def names_on_every_node(rc: RedisCluster, count: int = 3) -> list[str]:
    """Lock names served by distinct nodes."""
    found: dict[str, str] = {}
    i = 0
    while len(found) < count:
        name = f"order:{i}"
        found.setdefault(rc.get_node_from_key(name).name, name)
        i += 1
    return list(found.values())


@pytest.mark.parametrize("mode", ["module", "lua"])
def test_locks_live_on_their_nodes(rc: RedisCluster, cluster: list[Server], mode: str) -> None:
    locks = redislock.LockClient(rc, lease=0.6, mode="auto" if mode == "module" else "lua")
    assert locks.mode == mode
    try:
        held = [locks.lock(name, fenced=True) for name in names_on_every_node(rc)]
        for lock in held:
            assert lock.acquire()
            assert lock.token is not None
            with node_of(rc, cluster, lock.name).client() as node:
                assert node.hgetall(lock.name) == {lock.owner.encode(): b"1"}
                assert node.exists(f"redisson_lock_token:{{{lock.name}}}") == 1
        time.sleep(1.5)  # the watchdog renews on every node
        for lock in held:
            assert lock.owned() and lock.hold_count() == 1
            lock.release()
            assert not lock.locked()
    finally:
        locks.close()


@pytest.mark.parametrize("mode", ["module", "lua"])
def test_waiting_in_a_cluster(rc: RedisCluster, cluster: list[Server], mode: str) -> None:
    locks = redislock.LockClient(rc, lease=5, mode=mode)
    name = names_on_every_node(rc)[1]
    node = node_of(rc, cluster, name).client()
    try:
        holder = locks.lock(name, owner="holder")
        assert holder.acquire()
        result: list[float] = []

        def wait() -> None:
            started = time.monotonic()
            assert locks.lock(name, owner="waiter").acquire(timeout=10)
            result.append(time.monotonic() - started)

        t = threading.Thread(target=wait)
        t.start()
        if mode == "module":
            assert wait_until(lambda: lock_info(node, name).get("waiters") == 1)
        else:  # sharded subscription on the key's node; the Lua release uses SPUBLISH
            channel = f"redisson_lock__channel:{{{name}}}"
            assert wait_until(lambda: node.execute_command("PUBSUB", "SHARDNUMSUB", channel)[1] == 1)
        holder.release()
        t.join(timeout=10)
        assert result and result[0] < 4  # woken by the release, not by the 5 s lease
        assert node.hgetall(name) == {b"waiter": b"1"}
    finally:
        node.close()
        locks.close()


def test_sync_replicas_wait_goes_to_the_key_node(rc: RedisCluster, cluster: list[Server]) -> None:
    locks = redislock.LockClient(rc)
    name = names_on_every_node(rc)[2]
    target = node_of(rc, cluster, name)
    for n in cluster:
        with n.client() as c:
            c.config_resetstat()
    with pytest.raises(redislock.ReplicaSyncError) as failure:
        locks.lock(name, sync_replicas=1, sync_timeout=0.1).acquire()
    assert (failure.value.acked, failure.value.wanted) == (0, 1)
    for n in cluster:
        with n.client() as c:
            waits = c.info("commandstats").get("cmdstat_wait", {}).get("calls", 0)
            assert waits == (1 if n is target else 0)
    with target.client() as c:
        assert c.exists(name) == 0  # given back
    locks.close()


@pytest.mark.parametrize("mode", ["module", "lua"])
def test_asyncio_cluster(cluster: list[Server], mode: str) -> None:
    async def main() -> None:
        arc = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=cluster[0].port)
        locks = ral.LockClient(arc, lease=5, mode=mode)
        try:
            assert await locks.detect_mode() == mode
            for name in ("async:a", "async:b", "async:c"):
                lock = locks.lock(name)
                async with lock:
                    assert await lock.owned()
                    assert await arc.hget(name, lock.owner) == b"1"
                    other = asyncio.create_task(locks.lock(name, owner="w").acquire(timeout=10))
                    await asyncio.sleep(0.1)
                    assert not other.done()
                assert await asyncio.wait_for(other, 5) is True
                assert await arc.hgetall(name) == {b"w": b"1"}
                await arc.delete(name)
        finally:
            await locks.close()
            await arc.aclose()

    asyncio.run(main())


def test_lua_names_without_a_valid_hash_tag_are_refused(rc: RedisCluster, cluster: list[Server]) -> None:
    """`a{b` / `{}x` could be acquired in Lua mode but never released (CROSSSLOT between the
    lock and its release channel): refused before anything is sent."""
    locks = redislock.LockClient(rc, lease=5.0, mode="lua")
    try:
        assert locks.mode == "lua"
        before = [evalsha_calls(n) for n in cluster]
        for name in ("a{b", "{}x", "x}{y", b"a{b"):
            with pytest.raises(ValueError, match="hash tag"):
                locks.lock(name).acquire(blocking=False)
        assert [evalsha_calls(n) for n in cluster] == before  # nothing was sent
        assert rc.exists("a{b", "{}x", "x}{y") == 0
        for name in ("a{b}", "{tag}x", "plain", "a{b}{c"):
            lock = locks.lock(name, fenced=True)
            assert lock.acquire(blocking=False)
            lock.release()
            assert rc.exists(name) == 0
        assert rc.set("after", "v") and rc.get("after") == b"v"
    finally:
        locks.close()


def evalsha_calls(node: Server) -> int:
    with node.client() as r:
        return int(r.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


@pytest.mark.parametrize("mode", ["module", "lua"])
def test_semaphores_in_a_cluster(rc: RedisCluster, cluster: list[Server], mode: str) -> None:
    """Semaphores on every node: permits set, renewed and released on the key's node; a waiter
    woken by a release (the server's queue, or a sharded message in lua mode)."""
    if mode == "module" and not module_has_semaphore(cluster[0]):
        pytest.skip("the module has no semaphore commands (LOCK.SEMACQUIRE)")
    locks = redislock.LockClient(rc, lease=1.0, mode=mode)
    try:
        sems = [locks.semaphore(name, permits=2) for name in names_on_every_node(rc)]
        for sem in sems:
            assert sem.mode == mode
            with node_of(rc, cluster, sem.name).client() as node:
                assert node.get(sem.name) == b"2"
        permits = [sem.acquire(2) for sem in sems]
        time.sleep(1.5)  # the watchdog renews on every node
        assert all(p.owned() for p in permits)
        result: list[float] = []

        def wait() -> None:
            started = time.monotonic()
            with sems[1].acquire(1, timeout=10):
                result.append(time.monotonic() - started)

        t = threading.Thread(target=wait)
        t.start()
        time.sleep(0.3)
        permits[1].release()
        t.join(timeout=10)
        assert result and result[0] < 2  # woken by the release, not by a lease
        for p in (permits[0], permits[2]):
            p.release()
        for sem in sems:
            assert sem.available() == 2
            with node_of(rc, cluster, sem.name).client() as node:
                assert node.zcard(f"{{{sem.name}}}:timeout") == 0
        if mode == "lua":
            for name in ("a{b", "{}x"):
                with pytest.raises(ValueError, match="hash tag"):
                    locks.semaphore(name, permits=1)
    finally:
        locks.close()
