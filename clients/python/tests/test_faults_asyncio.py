"""redislock.asyncio under production faults (issue 17, client.md section 5), real servers.

Cancellation mid-wait, ``asyncio.wait_for`` / ``asyncio.timeout`` owners, a hung server (the
watchdog task and close()), MultiLock/RedLock with one of three servers hung or killed. Each
test ends with the app's own SET/GET round-trip and the keyspace matching the client's book.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.asyncio.sentinel
from conftest import Server, free_port, lock_info

import redislock
import redislock.asyncio as ral


async def in_step(r: redis.asyncio.Redis) -> None:
    marker = uuid.uuid4().hex
    started = time.monotonic()
    assert await r.get(f"missing:{marker}") is None
    assert await r.set(f"s:{marker}", marker) is True
    assert await r.get(f"s:{marker}") == marker.encode()
    assert await r.delete(f"s:{marker}") == 1
    assert time.monotonic() - started < 1.0


def believed(lock: ral.Lock, owner: str) -> int:
    hold = lock.client._engine.registry.get(lock.name, owner)
    return 0 if hold is None or hold.lost else hold.count


async def eventually(predicate, timeout: float = 3.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await predicate():
            return True
        await asyncio.sleep(0.01)
    return bool(await predicate())


@pytest.fixture
async def ar(server: Server) -> AsyncIterator[redis.asyncio.Redis]:
    client = redis.asyncio.Redis(port=server.port)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
async def raw(server: Server) -> AsyncIterator[redis.asyncio.Redis]:
    client = redis.asyncio.Redis(port=server.port, socket_timeout=5)
    try:
        yield client
    finally:
        await client.aclose()


async def queued(raw: redis.asyncio.Redis, server: Server, key: str) -> bool:
    if server.module:
        reply = await raw.execute_command("LOCK.INFO", key)
        items = dict(zip(reply[::2], reply[1::2])) if isinstance(reply, list) else (reply or {})
        return int(items.get(b"waiters", items.get("waiters", 0)) or 0) == 1
    numsub = await raw.pubsub_numsub(f"redisson_lock__channel:{{{key}}}")
    return bool(numsub[0][1] == 1)


async def test_wait_for_and_timeout_acquire_for_the_caller(ar: redis.asyncio.Redis, raw: redis.asyncio.Redis) -> None:
    """On Python <= 3.11 wait_for runs the coroutine in a task of its own: the lock used to be
    taken by that task (owned() False in the caller, release() NotOwnedError, lock leaked)."""
    locks = ral.LockClient(ar, lease=5.0)
    try:
        lock = locks.lock("wf")
        assert await asyncio.wait_for(lock.acquire(), 5) is True
        assert await lock.owned() and await lock.hold_count() == 1
        assert await raw.hgetall("wf") == {lock.owner.encode(): b"1"}
        await asyncio.wait_for(lock.release(), 5)
        assert await raw.exists("wf") == 0
        if sys.version_info >= (3, 11):
            async with asyncio.timeout(5):
                assert await lock.acquire()
            assert await lock.owned()
            async with asyncio.timeout(5):
                await lock.release()
            assert await raw.exists("wf") == 0
        await in_step(ar)
    finally:
        await locks.close()


async def test_cancelled_while_waiting(server: Server, ar: redis.asyncio.Redis, raw: redis.asyncio.Redis) -> None:
    locks = ral.LockClient(ar, lease=5.0)
    try:
        holder = locks.lock("cw", owner="holder")
        assert await holder.acquire(lease=10)
        lock = locks.lock("cw")
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(lock.acquire(timeout=5), 0.4)
        owner = lock.owner
        task = asyncio.create_task(lock.acquire(timeout=5))
        assert await eventually(lambda: queued(raw, server, "cw"))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await in_step(ar)
        if server.module:
            assert await eventually(lambda: _no_waiters(raw))
        assert await raw.hgetall("cw") == {b"holder": b"1"}
        assert believed(lock, owner) == 0
        await holder.release()
        assert await raw.exists("cw") == 0
        await in_step(ar)
    finally:
        await locks.close()


async def _no_waiters(raw: redis.asyncio.Redis) -> bool:
    reply = await raw.execute_command("LOCK.INFO", "cw")
    items = dict(zip(reply[::2], reply[1::2])) if isinstance(reply, list) else (reply or {})
    return int(items.get(b"waiters", items.get("waiters", 0)) or 0) == 0


async def test_cancel_racing_the_grant(server: Server, ar: redis.asyncio.Redis, raw: redis.asyncio.Redis) -> None:
    """Cancellation right when the lock is handed over: client and server agree afterwards."""
    locks = ral.LockClient(ar, lease=5.0)
    try:
        for trial in range(10):
            key = f"arace:{trial}"
            holder = locks.lock(key, owner="holder")
            assert await holder.acquire(lease=10)
            lock = locks.lock(key)
            owner = lock.owner
            task = asyncio.create_task(lock.acquire(timeout=5))
            assert await eventually(lambda key=key: queued(raw, server, key))
            await holder.release()
            for _ in range(trial % 3):
                await asyncio.sleep(0)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await in_step(ar)
            count = await raw.hget(key, owner)
            assert int(count or 0) == believed(lock, owner), (await raw.hgetall(key), believed(lock, owner))
            if believed(lock, owner):
                await lock.release()
            assert await raw.exists(key) == 0
    finally:
        await locks.close()


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Task.cancelling() is 3.11+")
async def test_a_swallowed_cancellation_still_cancels(
    server: Server, ar: redis.asyncio.Redis, raw: redis.asyncio.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Python < 3.12's wait_for, which redis-py wraps around each send on a connection with a
    socket_timeout, drops a cancellation that lands as the send completes. The task still counts
    the request: acquire must end cancelled, and leave nothing held on the server."""
    swallow = False
    send = redis.asyncio.connection.Connection.send_packed_command

    async def send_swallowing(self: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal swallow
        await send(self, *args, **kwargs)
        if swallow:
            swallow = False
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):  # what wait_for does
                await asyncio.sleep(0)

    monkeypatch.setattr(redis.asyncio.connection.Connection, "send_packed_command", send_swallowing)
    locks = ral.LockClient(ar, lease=5.0)
    try:
        for held in (False, True):
            key = f"aswallow:{held}"
            holder = locks.lock(key, owner="holder")
            if held:
                assert await holder.acquire(lease=10)
            lock = locks.lock(key)
            owners: list[str] = []

            async def acquire(lock: ral.Lock = lock, owners: list[str] = owners) -> bool:
                nonlocal swallow
                owners.append(lock.owner)
                await lock.acquire(timeout=0)  # settles the mode and loads the scripts
                if await lock.owned():
                    await lock.release()
                swallow = True
                return await lock.acquire(timeout=3)

            task = asyncio.create_task(acquire())
            started = time.monotonic()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert time.monotonic() - started < 2.0
            await in_step(ar)
            assert await eventually(lambda key=key, owner=owners[0]: _field_gone(raw, key, owner))
            assert believed(lock, owners[0]) == 0
            if held:
                assert await raw.hgetall(key) == {b"holder": b"1"}
                await holder.release()
            assert await raw.exists(key) == 0
    finally:
        await locks.close()


async def _field_gone(raw: redis.asyncio.Redis, key: str, owner: str) -> bool:
    return not await raw.hexists(key, owner)


async def test_huge_timeout_refused_before_sending(ar: redis.asyncio.Redis, raw: redis.asyncio.Redis) -> None:
    locks = ral.LockClient(ar, lease=5.0)
    try:
        holder = locks.lock("ahuge", owner="holder")
        assert await holder.acquire(lease=10)
        with pytest.raises(ValueError):
            await locks.lock("ahuge").acquire(timeout=1e10)
        await in_step(ar)
        assert await raw.hgetall("ahuge") == {b"holder": b"1"}
        await holder.release()
    finally:
        await locks.close()


async def test_hung_server_watchdog_task(servers: list[Server]) -> None:
    servers.append(Server(module=True))
    server = servers[0]
    ar = redis.asyncio.Redis(port=server.port)
    locks = ral.LockClient(ar, lease=1.2)
    lost = asyncio.Event()
    try:
        lock = locks.lock("ahung", on_lost=lost.set)
        assert await lock.acquire()
        await asyncio.sleep(0.5)
        server.pause()
        stopped = time.monotonic()
        await asyncio.wait_for(lost.wait(), 1.2 + 0.4 + 0.5)
        assert time.monotonic() - stopped <= 1.2 + 0.4 + 0.3
        started = time.monotonic()
        assert await lock.owned() is False
        assert time.monotonic() - started < 0.1
        started = time.monotonic()
        await locks.close()
        assert time.monotonic() - started < 2.0
    finally:
        server.resume()
    raw = redis.asyncio.Redis(port=server.port, socket_timeout=5)
    assert await eventually(lambda: _gone(raw, "ahung"))
    await in_step(ar)
    await raw.aclose()
    await ar.aclose()


async def _gone(raw: redis.asyncio.Redis, key: str) -> bool:
    return int(await raw.exists(key)) == 0


@pytest.fixture
def trio(servers: list[Server]) -> list[Server]:
    for _ in range(3):
        servers.append(Server(module=True))
    return servers


async def test_redlock_multilock_with_a_hung_server(trio: list[Server]) -> None:
    made = [redis.asyncio.Redis(port=s.port) for s in trio]
    raws = [redis.Redis(port=s.port, socket_timeout=5) for s in trio]
    clients = [ral.LockClient(r, lease=5.0) for r in made]
    try:
        for c in clients:
            assert await c.detect_mode() == "module"
        trio[1].pause()
        red = ral.RedLock([c.lock("arl") for c in clients])
        started = time.monotonic()
        assert await red.acquire(timeout=2) is True
        assert time.monotonic() - started < 2.5
        assert raws[0].exists("arl") == 1 and raws[2].exists("arl") == 1
        await red.release()
        assert raws[0].exists("arl") == 0 and raws[2].exists("arl") == 0
        multi = ral.MultiLock([c.lock("aml") for c in clients])
        started = time.monotonic()
        assert await multi.acquire(timeout=1) is False
        assert time.monotonic() - started < 1.5
        assert raws[0].exists("aml") == 0 and raws[2].exists("aml") == 0
        await in_step(made[0])
    finally:
        trio[1].resume()
        for c in clients:
            await c.close()
        for r in made:
            await r.aclose()
    for raw in raws:
        raw.close()


async def test_cancel_during_multilock_acquire_gives_back_components(trio: list[Server]) -> None:
    made = [redis.asyncio.Redis(port=s.port) for s in trio]
    raws = [redis.Redis(port=s.port, socket_timeout=5) for s in trio]
    clients = [ral.LockClient(r, lease=5.0) for r in made]
    try:
        assert await clients[2].lock("ami", owner="other").acquire(lease=10)
        multi = ral.MultiLock([c.lock("ami") for c in clients])
        task = asyncio.create_task(multi.acquire(timeout=8))
        await asyncio.sleep(0.6)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert raws[0].exists("ami") == 0 and raws[1].exists("ami") == 0
        assert raws[2].hgetall("ami") == {b"other": b"1"}
        assert lock_info(raws[2], "ami").get("waiters") == 0
        for r in made:
            await in_step(r)
    finally:
        for c in clients:
            await c.close()
        for r in made:
            await r.aclose()
        for raw in raws:
            raw.close()


async def test_type_checks_and_mode_over_a_unix_socket(tmp_path_factory: pytest.TempPathFactory) -> None:
    with pytest.raises(TypeError):
        ral.LockClient(redis.Redis())  # a blocking client
    with pytest.raises(TypeError):
        redislock.LockClient(redis.asyncio.Redis())  # an asyncio client
    with pytest.raises(TypeError):
        redislock.LockClient("localhost:6379")
    path = f"/tmp/redislock-{uuid.uuid4().hex[:8]}.sock"
    server = Server(True, "--unixsocket", path, "--unixsocketperm", "700")
    try:
        ar = redis.asyncio.Redis(unix_socket_path=path)
        locks = ral.LockClient(ar)
        assert locks.mode == "module"  # before any await, over a blocking unix-socket connection
        lock = locks.lock(b"unix")
        assert await lock.acquire(timeout=1)
        await lock.release()
        await locks.close()
        await ar.aclose()
    finally:
        server.close()


async def test_asyncio_api_additions(ar: redis.asyncio.Redis, raw: redis.asyncio.Redis) -> None:
    locks = ral.LockClient(ar, lease=5.0)
    try:
        lock = locks.lock(b"aapi", timeout=0.3, fenced=True)
        assert lock.name == "aapi"
        with pytest.raises(redislock.NotOwnedError):
            await lock.extend(5)
        assert await lock.acquire(lease=1.0)
        token = lock.token
        assert token is not None
        assert await lock.acquire(lease=1.0) and lock.token == token  # reentrant: same token
        await lock.extend(20, replace_ttl=True)
        assert 19_000 < await raw.pttl("aapi") <= 20_000
        await lock.extend(10)  # redis-py's extend: added to what is left
        assert 29_000 < await raw.pttl("aapi") <= 30_000
        await lock.release()
        await lock.release()
        other = locks.lock("aapi", owner="holder")
        assert await other.acquire(lease=10)
        started = time.monotonic()
        with pytest.raises(redislock.LockTimeout):
            async with lock:
                pass  # pragma: no cover
        assert 0.25 < time.monotonic() - started < 1.5
        await other.release()
        multi = ral.MultiLock([lock])
        assert await asyncio.wait_for(multi.acquire(timeout=1), 5)
        await asyncio.wait_for(multi.release(), 5)  # the caller's owners, also through wait_for
        assert await raw.exists("aapi") == 0
        await in_step(ar)
    finally:
        await locks.close()


async def test_forked_child_is_another_owner(server: Server, raw: redis.asyncio.Redis) -> None:
    """After fork the child's asyncio client has a new id and holds nothing; its own event loop
    (with its own redis client, as redis-py's asyncio connections belong to the parent's loop)
    takes and keeps its own locks; the parent's watchdog task keeps the parent's lock."""
    ar = redis.asyncio.Redis(port=server.port, socket_timeout=5)
    locks = ral.LockClient(ar, lease=0.9)
    try:
        lock = locks.lock("aforked", fenced=True)
        assert await lock.acquire()
        parent_id, parent_owner = locks.id, lock.owner
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report through the pipe, never return into pytest
            code = 1
            try:
                checks: list[object] = [locks.id != parent_id]

                async def child() -> list[bool]:
                    # The child's book: nothing held, not even under the parent's owner id.
                    out = [lock.owner != parent_owner, lock.token is None]
                    out += [believed(lock, parent_owner) == 0, believed(lock, lock.owner) == 0]
                    cr = redis.asyncio.Redis(port=server.port, socket_timeout=5)
                    mine_locks = ral.LockClient(cr, lease=0.9)
                    mine = mine_locks.lock("aforked")
                    out.append(await mine.acquire(blocking=False) is False)  # the parent's lock
                    own = mine_locks.lock("achild-own")
                    out.append(await own.acquire())  # kept by the child's own watchdog task
                    await asyncio.sleep(2.2)
                    out.append(await cr.hget("achild-own", own.owner) == b"1")
                    await own.release()
                    out.append(await cr.exists("achild-own") == 0)
                    await mine_locks.close()
                    await cr.aclose()
                    return out

                try:
                    checks += asyncio.run(child())
                except Exception as error:  # reported to the parent, which fails the test
                    checks.append(repr(error))
                os.write(write, repr(checks).encode())
                code = 0 if all(c is True for c in checks) else 1
            finally:
                os._exit(code)
        os.close(write)
        await asyncio.sleep(2.0)  # past two leases: the parent's watchdog task still renews
        assert await raw.hget("aforked", parent_owner) == b"1"
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            await asyncio.sleep(0.05)
        report = os.read(read, 1000).decode()
        os.close(read)
        assert os.waitstatus_to_exitcode(status) == 0, report
        assert await lock.owned() and await raw.hgetall("aforked") == {parent_owner.encode(): b"1"}
        await lock.release()
        await in_step(ar)
    finally:
        await locks.close()
        await ar.aclose()


# -- issue 22 -------------------------------------------------------------------------------


@pytest.fixture(params=["module", "lua"])
def fresh(request: pytest.FixtureRequest, servers: list[Server]) -> Server:
    servers.append(Server(module=request.param == "module"))
    return servers[0]


async def _resume_when_done(server: Server, task: asyncio.Future[object], limit: float) -> None:
    """Keep ``server`` stopped until ``task`` ends (at most ``limit`` seconds), then resume it."""
    await asyncio.wait({task}, timeout=limit)
    server.resume()


async def test_a_timed_out_read_is_never_a_grant(fresh: Server) -> None:
    """redis.asyncio's read_response(timeout=t) returns None when t runs out, and None read as
    nil is "granted": acquire(timeout=1) on a stopped server (socket_timeout 0.5) returned True
    after 3.5 s while another owner held the lock, and the app's next command read the reply."""
    ar = redis.asyncio.Redis(port=fresh.port, socket_timeout=0.5)
    raw = redis.asyncio.Redis(port=fresh.port, socket_timeout=5)
    locks = ral.LockClient(ar, lease=5.0)
    try:
        holder = locks.lock("aread", owner="holder")
        assert await holder.acquire(lease=10)
        lock = locks.lock("aread")
        owner = lock.owner
        fresh.pause()
        started = time.monotonic()
        attempt = asyncio.ensure_future(lock.acquire(timeout=1))
        resumer = asyncio.ensure_future(_resume_when_done(fresh, attempt, 4.0))
        with pytest.raises(redis.TimeoutError):
            await attempt
        assert time.monotonic() - started < 1 + 0.5 + 0.5  # on time, too (was 3.5 s)
        await resumer
        assert believed(lock, owner) == 0
        assert await raw.hgetall("aread") == {b"holder": b"1"}
        await in_step(ar)
    finally:
        fresh.resume()
        await locks.close()
        await ar.aclose()
        await raw.aclose()


@pytest.fixture(params=["module", "lua"])
def trio_modes(request: pytest.FixtureRequest, servers: list[Server]) -> list[Server]:
    for _ in range(3):
        servers.append(Server(module=request.param == "module"))
    return servers


async def test_redlock_of_locks_held_elsewhere_is_not_granted_by_timeouts(trio_modes: list[Server]) -> None:
    """A RedLock over three locks, all held by another owner, on servers that stop answering:
    each component's bounded read ran out, returned None, and the RedLock returned True."""
    ars = [redis.asyncio.Redis(port=s.port, socket_timeout=0.2) for s in trio_modes]
    clients = [ral.LockClient(a, lease=5.0) for a in ars]
    try:
        for c in clients:
            assert await c.lock("rl-held", owner="other").acquire(lease=10)
        for s in trio_modes:
            s.pause()
        red = ral.RedLock([c.lock("rl-held") for c in clients])
        started = time.monotonic()
        attempt = asyncio.ensure_future(red.acquire(timeout=0.3))
        try:
            assert await attempt is False
        finally:
            for s in trio_modes:
                s.resume()
        assert time.monotonic() - started < 0.3 + 0.5
        for a in ars:
            assert await a.hgetall("rl-held") == {b"other": b"1"}
            await in_step(a)
    finally:
        for s in trio_modes:
            s.resume()
        for c in clients:
            await c.close()
        for a in ars:
            await a.aclose()


async def test_wait_without_limit_outlasts_an_early_reply(module_server: Server) -> None:
    ar = redis.asyncio.Redis(port=module_server.port, socket_timeout=5)
    await ar.flushall()
    locks = ral.LockClient(ar, lease=5.0)
    limit = (await ar.config_get("lock.max-waiters"))["lock.max-waiters"]
    try:
        await ar.config_set("lock.max-waiters", 1)
        holder = locks.lock("aearly", owner="holder")
        assert await holder.acquire(lease=0.4)
        first = asyncio.ensure_future(locks.lock("aearly", owner="first").acquire(lease=0.3))
        assert await eventually(lambda: _waiters(ar, "aearly", 1))
        lock = locks.lock("aearly")
        started = time.monotonic()
        async with lock:  # timeout None: waits behind the holder and the first waiter
            assert await lock.owned()
        assert 0.3 < time.monotonic() - started < 5
        assert await first is True
        await in_step(ar)
    finally:
        await ar.config_set("lock.max-waiters", limit)
        await locks.close()
        await ar.aclose()


async def _waiters(r: redis.asyncio.Redis, key: str, n: int) -> bool:
    reply = await r.execute_command("LOCK.INFO", key)
    items = dict(zip(reply[::2], reply[1::2])) if isinstance(reply, list) else (reply or {})
    return int(items.get(b"waiters", items.get("waiters", 0)) or 0) == n


async def test_small_pools(server: Server) -> None:
    """One pooled connection: a Lua-mode waiter no longer needs a second one, and a release
    never waits for the pool (a module-mode waiter holds the only connection while it waits)."""
    pool = redis.asyncio.BlockingConnectionPool(port=server.port, max_connections=1, timeout=2)
    ar = redis.asyncio.Redis(connection_pool=pool)
    locks = ral.LockClient(ar, lease=5.0)
    try:
        holder = locks.lock("asmall", owner="holder")
        assert await holder.acquire(lease=3)
        lock = locks.lock("asmall")
        waiter = asyncio.ensure_future(lock.acquire(timeout=5))
        await asyncio.sleep(0.3)
        started = time.monotonic()
        await holder.release()
        assert time.monotonic() - started < 0.5
        assert await asyncio.wait_for(waiter, 5) is True
        await lock.release()
        await in_step(ar)
    finally:
        await locks.close()
        await ar.aclose()
        await pool.disconnect()  # a pool passed in is the caller's to close (redis-py 5.0)


async def test_renewal_stops_with_the_task_and_at_max_hold(server: Server, raw: redis.asyncio.Redis) -> None:
    ar = redis.asyncio.Redis(port=server.port)
    locks = ral.LockClient(ar, lease=0.6)
    lost = asyncio.Event()
    try:
        lock = locks.lock("atask")

        async def take() -> bool:
            return await lock.acquire()  # for the task this runs in, which ends holding it

        assert await asyncio.ensure_future(take())
        capped = locks.lock("acapped", max_hold=1.2, on_lost=lost.set)
        kept = locks.lock("akept")
        assert await capped.acquire() and await kept.acquire()
        started = time.monotonic()
        assert await eventually(lambda: _gone(raw, "atask"), timeout=3)
        await asyncio.wait_for(lost.wait(), 2)
        assert 0.9 < time.monotonic() - started < 1.8
        assert await eventually(lambda: _gone(raw, "acapped"), timeout=1)
        assert await kept.owned()
        await kept.release()
    finally:
        await locks.close()
        await ar.aclose()


async def test_mode_through_sentinel(tmp_path: Path, servers: list[Server]) -> None:
    """locks.mode with a Sentinel-managed asyncio client: the connection kwargs name no host
    (the sentinels do), and the blocking probe went to localhost:6379 instead of the master."""
    servers.append(Server(module=True))
    master = servers[0]
    port = free_port()
    conf = tmp_path / "sentinel.conf"
    conf.write_text(f"port {port}\nbind 127.0.0.1\nsentinel monitor lockmaster 127.0.0.1 {master.port} 1\n")
    log = open(tmp_path / "sentinel.log", "wb")  # noqa: SIM115
    sentinel = subprocess.Popen(["redis-server", str(conf), "--sentinel"], stdout=log, stderr=subprocess.STDOUT)
    try:
        probe = redis.Redis(port=port, socket_timeout=1)
        deadline = time.monotonic() + 10
        while True:
            try:
                if probe.execute_command("SENTINEL", "get-master-addr-by-name", "lockmaster"):
                    break
            except redis.ConnectionError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "sentinel.log").read_text()
            await asyncio.sleep(0.02)
        probe.close()
        managed = redis.asyncio.sentinel.Sentinel([("127.0.0.1", port)], socket_timeout=2)
        ar = managed.master_for("lockmaster", socket_timeout=2)
        locks = ral.LockClient(ar, lease=5.0)
        assert locks.mode == "module"  # before any await: the master's answer, found via the sentinel
        lock = locks.lock("sentinel")
        assert await lock.acquire(timeout=1)
        assert master.client().hget("sentinel", lock.owner) == b"1"
        await lock.release()
        await locks.close()
        await ar.aclose()
        for s in managed.sentinels:
            await s.aclose()
    finally:
        sentinel.kill()
        sentinel.wait(timeout=10)
        log.close()
