"""The blocking client under production faults (issue 17, client.md section 5), real servers.

Every test ends with the same two checks: the application's own connection still answers in
step (``SET``/``GET`` round-trip), and the server's keyspace matches what the client believes
(the registry of holds).
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from conftest import Server, lock_info, wait_until

import redislock
from redislock._core import Registry


def in_step(r: redis.Redis) -> None:
    """The application's connections still read their own replies."""
    marker = uuid.uuid4().hex
    started = time.monotonic()
    assert r.get(f"missing:{marker}") is None
    assert r.set(f"s:{marker}", marker) is True
    assert r.get(f"s:{marker}") == marker.encode()
    assert r.delete(f"s:{marker}") == 1
    assert time.monotonic() - started < 1.0


def believed(lock: redislock.Lock, owner: str | None = None) -> int:
    """How many holds the client believes ``owner`` has (its book of holds)."""
    hold = lock.client._engine.registry.get(lock.name, owner or lock.owner)
    return 0 if hold is None or hold.lost else hold.count


def server_count(raw: redis.Redis, key: str, owner: str) -> int:
    value = raw.hget(key, owner)
    return 0 if value is None else int(value)


def matches(raw: redis.Redis, lock: redislock.Lock, owner: str | None = None) -> bool:
    owner = owner or lock.owner
    return server_count(raw, lock.name, owner) == believed(lock, owner)


@pytest.fixture(autouse=True)
def sigint_raises() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt during each test, even when the runner inherited SIGINT
    ignored (a background job without job control, ``nohup``): Python keeps an ignored SIGINT
    ignored, and every interrupt below would then be lost."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def interrupt_after(seconds: float) -> threading.Timer:
    """SIGINT to this process (KeyboardInterrupt in the main thread) after ``seconds``."""
    timer = threading.Timer(seconds, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    return timer


@pytest.fixture
def raw(server: Server) -> Iterator[redis.Redis]:
    client = server.client(socket_timeout=5)
    try:
        yield client
    finally:
        client.close()


def test_huge_timeout_is_refused_before_sending(server: Server, r: redis.Redis, raw: redis.Redis) -> None:
    """acquire(timeout=1e10) raised OverflowError after LOCK.ACQUIRE ... WAIT was sent: the
    app's next GET read the lock's reply, and the server granted a lock nobody tracked."""
    locks = redislock.LockClient(r, lease=5.0)
    try:
        holder = locks.lock("huge", owner="holder")
        assert holder.acquire(lease=0.5)
        lock = locks.lock("huge")
        for bad in (1e10, float("inf"), 1e9):
            with pytest.raises(ValueError):
                lock.acquire(timeout=bad)
        with pytest.raises(ValueError):
            locks.lock("huge", timeout=1e10)
        in_step(r)
        time.sleep(0.8)  # the holder's fixed lease ran out; no waiter was ever queued
        assert raw.exists("huge") == 0
        assert believed(lock) == 0
        in_step(r)
    finally:
        locks.close()


def test_interrupt_while_waiting(server: Server, r: redis.Redis, raw: redis.Redis) -> None:
    """Ctrl-C in the middle of a blocking acquire: nothing pending on the app's connections,
    no waiter left on the server, no hold on either side."""
    locks = redislock.LockClient(r, lease=5.0)
    try:
        holder = locks.lock("intr", owner="holder")
        assert holder.acquire(lease=10)
        lock = locks.lock("intr")
        timer = interrupt_after(0.4)
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            lock.acquire(timeout=5)
        timer.join()
        assert time.monotonic() - started < 2
        in_step(r)
        if server.module:
            assert wait_until(lambda: lock_info(raw, "intr").get("waiters") == 0, timeout=2)
        assert raw.hgetall("intr") == {b"holder": b"1"}
        assert matches(raw, lock) and believed(lock) == 0
        holder.release()
        assert raw.exists("intr") == 0
        in_step(r)
    finally:
        locks.close()


def test_interrupt_racing_the_grant(server: Server, r: redis.Redis, raw: redis.Redis) -> None:
    """Ctrl-C right when the lock is handed over: whichever wins, the client and the server
    agree afterwards (a grant whose reply was never read is released, not leaked)."""
    locks = redislock.LockClient(r, lease=5.0)
    outcomes: set[str] = set()
    try:
        for trial in range(12):
            key = f"race:{trial}"
            holder = locks.lock(key, owner="holder")
            assert holder.acquire(lease=10)
            lock = locks.lock(key)

            def release_then_interrupt(
                key: str = key, holder: redislock.Lock = holder, delay: float = 0.002 * (trial % 4)
            ) -> None:
                if server.module:
                    wait_until(lambda: lock_info(raw, key).get("waiters") == 1, timeout=3)
                else:
                    wait_until(lambda: raw.pubsub_numsub(f"redisson_lock__channel:{{{key}}}")[0][1] == 1, timeout=3)
                holder.release()
                time.sleep(delay)
                os.kill(os.getpid(), signal.SIGINT)

            helper = threading.Thread(target=release_then_interrupt)
            helper.start()
            try:
                try:
                    got = lock.acquire(timeout=5)
                    outcomes.add(f"returned {got}")
                    time.sleep(0.5)  # the interrupt lands here instead
                except KeyboardInterrupt:
                    outcomes.add("interrupted")
            except KeyboardInterrupt:
                outcomes.add("interrupted after")
            helper.join()
            in_step(r)
            assert wait_until(lambda lock=lock: matches(raw, lock), timeout=2), (
                raw.hgetall(key),
                believed(lock),
            )
            if believed(lock):
                lock.release()
            assert wait_until(lambda key=key: raw.exists(key) == 0, timeout=2)
    finally:
        locks.close()
    assert outcomes


def test_waiters_do_not_starve_the_watchdog(servers: list[Server]) -> None:
    """BlockingConnectionPool(max_connections=4) and 6 module-mode waiters: the waiters pin
    every pooled connection, the holder's lease is still renewed (own connection)."""
    servers.append(Server(module=True))
    server = servers[0]
    pool = redis.BlockingConnectionPool(port=server.port, max_connections=4, timeout=10)
    r = redis.Redis(connection_pool=pool)
    raw = server.client()
    locks = redislock.LockClient(r, lease=0.9)
    lost: list[object] = []
    try:
        holder = locks.lock("pool", owner="holder", on_lost=lambda: lost.append(1))
        assert holder.acquire()
        results: list[Any] = []

        def wait() -> None:
            lock = locks.lock("pool")
            try:
                got = lock.acquire(timeout=2.5)
                results.append(got)
                if got:
                    lock.release()
            except Exception as error:
                results.append(error)

        waiters = [threading.Thread(target=wait) for _ in range(6)]
        for w in waiters:
            w.start()
        assert wait_until(lambda: lock_info(raw, "pool").get("waiters") == 4, timeout=3)
        time.sleep(2.0)  # over two leases with every pooled connection pinned by a waiter
        assert raw.hgetall("pool") == {b"holder": b"1"}
        assert raw.pttl("pool") > 0
        assert not lost
        for w in waiters:
            w.join(timeout=15)
        assert not any(w.is_alive() for w in waiters)
        assert results.count(False) == 6, results
        assert holder.owned()
        holder.release()
        assert raw.exists("pool") == 0
        in_step(r)
    finally:
        locks.close()
        raw.close()
        r.close()


def test_hung_server_loses_on_time_and_close_is_quick(servers: list[Server]) -> None:
    """A SIGSTOPped server: the hold is lost by lease + one renewal interval (on_lost fires,
    owned() says False without a round trip) and close() returns within 2 s."""
    servers.append(Server(module=True))
    server = servers[0]
    r = server.client()  # the app's client: no socket timeout at all
    locks = redislock.LockClient(r, lease=1.2)  # renewed every 0.4 s
    lost = threading.Event()
    try:
        lock = locks.lock("hung", on_lost=lost.set)
        assert lock.acquire()
        time.sleep(0.5)
        server.pause()
        stopped = time.monotonic()
        assert lost.wait(timeout=1.2 + 0.4 + 0.5)
        assert time.monotonic() - stopped <= 1.2 + 0.4 + 0.3
        started = time.monotonic()
        assert lock.owned() is False  # no round trip: the server would not answer
        assert time.monotonic() - started < 0.1
        with pytest.raises(redislock.NotOwnedError):
            lock.release()
        started = time.monotonic()
        locks.close()
        assert time.monotonic() - started < 2.0
    finally:
        server.resume()
        locks.close()
    raw = server.client(socket_timeout=5)
    assert wait_until(lambda: raw.exists("hung") == 0, timeout=3)  # expired while nobody renewed
    assert believed(lock) == 0
    in_step(r)
    raw.close()
    r.close()


@pytest.fixture
def trio(servers: list[Server]) -> list[Server]:
    for _ in range(3):
        servers.append(Server(module=True))
    return servers


def plain_clients(trio: list[Server], lease: float = 5.0) -> list[redislock.LockClient]:
    # default redis-py options (no socket timeout), as an application would have them
    return [redislock.LockClient(s.client(), lease=lease) for s in trio]


def test_redlock_and_multilock_decide_on_time_with_a_hung_server(trio: list[Server]) -> None:
    clients = plain_clients(trio)
    raws = [s.client(socket_timeout=5) for s in trio]
    try:
        for c in clients:
            assert c.mode == "module"
        trio[1].pause()
        red = redislock.RedLock([c.lock("rl") for c in clients])
        started = time.monotonic()
        assert red.acquire(timeout=2) is True
        assert time.monotonic() - started < 2.5
        assert raws[0].exists("rl") == 1 and raws[2].exists("rl") == 1
        red.release()
        assert raws[0].exists("rl") == 0 and raws[2].exists("rl") == 0

        multi = redislock.MultiLock([c.lock("ml") for c in clients])
        started = time.monotonic()
        assert multi.acquire(timeout=1) is False
        assert time.monotonic() - started < 1.5
        assert wait_until(lambda: raws[0].exists("ml") == 0 and raws[2].exists("ml") == 0, timeout=2)
        in_step(clients[0].redis)
        in_step(clients[2].redis)
    finally:
        trio[1].resume()
        for c in clients:
            c.close()
    # what reached the hung server while it was stopped is given back once it answers again
    assert wait_until(lambda: raws[1].exists("ml") == 0 and raws[1].exists("rl") == 0, timeout=8)
    for raw in raws:
        raw.close()


def test_redlock_with_a_killed_server(trio: list[Server]) -> None:
    clients = plain_clients(trio)
    raws = [s.client(socket_timeout=5) for s in trio]
    try:
        for c in clients:
            assert c.mode == "module"
        trio[0].kill()
        red = redislock.RedLock([c.lock("rk") for c in clients])
        started = time.monotonic()
        assert red.acquire(timeout=2) is True
        assert time.monotonic() - started < 2.5
        assert raws[1].exists("rk") == 1 and raws[2].exists("rk") == 1
        red.release()
        multi = redislock.MultiLock([c.lock("mk") for c in clients])
        assert multi.acquire(timeout=1) is False
        assert raws[1].exists("mk") == 0 and raws[2].exists("mk") == 0
        in_step(clients[1].redis)
    finally:
        for c in clients:
            c.close()
        for raw in raws[1:]:
            raw.close()


def test_interrupt_during_multilock_acquire_gives_back_components(trio: list[Server]) -> None:
    clients = plain_clients(trio)
    raws = [s.client(socket_timeout=5) for s in trio]
    try:
        blocker = clients[2].lock("mi", owner="other")
        assert blocker.acquire(lease=10)
        multi = redislock.MultiLock([c.lock("mi") for c in clients])
        timer = interrupt_after(0.6)
        with pytest.raises(KeyboardInterrupt):
            multi.acquire(timeout=8)
        timer.join()
        # the two components already taken are released, not left held and renewed
        assert wait_until(lambda: raws[0].exists("mi") == 0 and raws[1].exists("mi") == 0, timeout=3)
        assert raws[2].hgetall("mi") == {b"other": b"1"}
        time.sleep(0.3)
        assert raws[0].exists("mi") == 0 and raws[1].exists("mi") == 0
        for c in clients:
            in_step(c.redis)
    finally:
        for c in clients:
            c.close()
        for raw in raws:
            raw.close()


def test_forked_child_is_another_owner(servers: list[Server]) -> None:
    """After fork the child has a new client id, holds nothing, and its own watchdog keeps its
    own locks; the parent's watchdog-kept lock stays held past its lease."""
    servers.append(Server(module=True))
    server = servers[0]
    r = server.client(socket_timeout=5)
    locks = redislock.LockClient(r, lease=0.9)
    try:
        lock = locks.lock("forked")
        assert lock.acquire()
        parent_id, parent_owner = locks.id, lock.owner
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report through the pipe, never return into pytest
            code = 1
            try:
                child = redislock.LockClient(server.client(socket_timeout=5), lease=0.9)
                mine = locks.lock("child-own")
                checks = [
                    locks.id != parent_id,
                    lock.owner != parent_owner,
                    lock.acquire(blocking=False) is False,  # the parent's lock is not ours
                    lock.owned() is False,
                    lock.token is None,
                    mine.acquire(),  # kept by the child's own watchdog
                ]
                time.sleep(2.2)
                checks.append(r.hget("child-own", mine.owner) == b"1")
                mine.release()
                checks.append(r.exists("child-own") == 0)
                child.close()
                os.write(write, repr(checks).encode())
                code = 0 if all(checks) else 1
            finally:
                os._exit(code)
        os.close(write)
        time.sleep(2.0)  # past two leases: the parent's watchdog still renews
        assert r.hget("forked", parent_owner) == b"1"
        _, status = os.waitpid(pid, 0)
        report = os.read(read, 1000).decode()
        os.close(read)
        assert os.waitstatus_to_exitcode(status) == 0, report
        assert lock.owned() and r.hgetall("forked") == {parent_owner.encode(): b"1"}
        lock.release()
        in_step(r)
    finally:
        locks.close()
        r.close()


def test_a_new_thread_with_a_recycled_ident_is_another_owner(r: redis.Redis, raw: redis.Redis) -> None:
    locks = redislock.LockClient(r, lease=5.0)
    try:
        lock = locks.lock("churn")
        first: list[Any] = []

        def take() -> None:
            first.append((threading.get_ident(), lock.owner, lock.acquire(lease=10)))

        t = threading.Thread(target=take)
        t.start()
        t.join()
        ident, owner, got = first[0]
        assert got
        seen: list[Any] = []
        for _ in range(50):  # thread idents are reused as soon as a thread ends

            def probe() -> None:
                seen.append((threading.get_ident(), lock.owner, lock.acquire(blocking=False)))

            t = threading.Thread(target=probe)
            t.start()
            t.join()
            if seen[-1][0] == ident:
                break
        assert all(o != owner for _, o, _ in seen)
        assert all(acquired is False for _, _, acquired in seen)
        assert raw.hgetall("churn") == {owner.encode(): b"1"}
        locks.lock("churn", owner=owner).release()
        in_step(r)
    finally:
        locks.close()


# -- issue 22 -------------------------------------------------------------------------------


@pytest.fixture(params=["module", "lua"])
def fresh(request: pytest.FixtureRequest, servers: list[Server]) -> Server:
    """A server of its own (it may be stopped), with or without the module."""
    servers.append(Server(module=request.param == "module"))
    return servers[0]


def test_acquire_against_a_stopped_server_returns_on_time(fresh: Server) -> None:
    """acquire(timeout=1) against a SIGSTOPped server (socket_timeout 0.5) raised after 5.5 s
    (module mode: the read waited timeout + 2 s + the socket timeout, then a clean-up round trip)."""
    r = fresh.client(socket_timeout=0.5)
    locks = redislock.LockClient(r, lease=5.0)
    try:
        holder = locks.lock("stopped", owner="holder")
        assert holder.acquire(lease=10)
        lock = locks.lock("stopped")
        fresh.pause()
        started = time.monotonic()
        with pytest.raises(redis.TimeoutError):
            lock.acquire(timeout=1)
        assert time.monotonic() - started < 1 + 0.5 + 0.5
        fresh.resume()
        raw = fresh.client(socket_timeout=5)
        assert wait_until(lambda: matches(raw, lock), timeout=3)
        assert raw.hgetall("stopped") == {b"holder": b"1"}
        in_step(r)
        raw.close()
    finally:
        fresh.resume()
        locks.close()
        r.close()


def test_fenced_acquire_decides_on_the_token(server: Server, locks: redislock.LockClient, raw: redis.Redis) -> None:
    """A lock held by another owner without a TTL (PERSIST) answers [-1, -1] to a fenced acquire:
    not acquired (the first element alone would read as "granted")."""
    raw.hset("persisted", "other", 1)
    lock = locks.lock("persisted", fenced=True)
    assert lock.acquire(blocking=False) is False
    assert lock.acquire(timeout=0.2) is False
    assert lock.token is None and believed(lock) == 0
    assert raw.hgetall("persisted") == {b"other": b"1"}
    assert raw.ttl("persisted") == -1


def test_wait_without_limit_outlasts_an_early_reply(module_server: Server) -> None:
    """With lock.max-waiters reached (or an owner longer than lock.max-waiter-bytes) the server
    answers WAIT at once with the PTTL: timeout=None must keep waiting, not return False."""
    r = module_server.client(socket_timeout=5)
    r.flushall()
    locks = redislock.LockClient(r, lease=5.0)
    limits = {k: r.config_get(k)[k] for k in ("lock.max-waiters", "lock.max-waiter-bytes")}
    try:
        r.config_set("lock.max-waiters", 1)
        holder = locks.lock("early", owner="holder")
        assert holder.acquire(lease=0.4)
        queued: list[bool] = []
        first = threading.Thread(target=lambda: queued.append(locks.lock("early", owner="first").acquire(lease=0.3)))
        first.start()
        assert wait_until(lambda: lock_info(r, "early").get("waiters") == 1, timeout=3)
        lock = locks.lock("early")
        started = time.monotonic()
        with lock:  # timeout None: no LockTimeout, it waits behind the holder and the first waiter
            assert lock.owned()
        assert 0.3 < time.monotonic() - started < 5
        first.join(timeout=5)
        assert queued == [True]
        r.config_set("lock.max-waiters", limits["lock.max-waiters"])
        r.config_set("lock.max-waiter-bytes", 8)
        long_owner = locks.lock("early", owner="an owner id longer than eight bytes")
        assert holder.acquire(lease=0.4)
        assert long_owner.acquire(timeout=5) is True
        long_owner.release()
        assert holder.acquire(lease=0.3)
        started = time.monotonic()
        assert long_owner.acquire(timeout=0.1) is False  # a finite wait still ends on time
        assert time.monotonic() - started < 0.1 + 0.5
        in_step(r)
    finally:
        for key, value in limits.items():
            r.config_set(key, value)
        locks.close()
        r.close()


def test_release_does_not_wait_for_the_pool(servers: list[Server]) -> None:
    """Pool of 2, two module-mode waiters pin both connections: the holder's release used to
    wait for the pool timeout and raise ConnectionError while the lease ran out."""
    servers.append(Server(module=True))
    pool = redis.BlockingConnectionPool(port=servers[0].port, max_connections=2, timeout=1)
    r = redis.Redis(connection_pool=pool)
    locks = redislock.LockClient(r, lease=5.0)
    raw = servers[0].client(socket_timeout=5)
    try:
        holder = locks.lock("starve", owner="holder")
        assert holder.acquire(lease=3)
        results: list[Any] = []

        def wait() -> None:
            lock = locks.lock("starve")
            got = lock.acquire(timeout=5)
            results.append(got)
            if got:
                lock.release()

        waiters = [threading.Thread(target=wait) for _ in range(2)]
        for w in waiters:
            w.start()
        assert wait_until(lambda: lock_info(raw, "starve").get("waiters") == 2, timeout=3)
        started = time.monotonic()
        holder.release()
        assert time.monotonic() - started < 0.5
        for w in waiters:
            w.join(timeout=10)
        assert results == [True, True]
        assert raw.exists("starve") == 0
        in_step(r)
    finally:
        locks.close()
        raw.close()
        r.close()


@pytest.mark.parametrize("pool_kind", ["blocking", "plain"])
def test_lua_waiter_needs_one_pooled_connection(plain_server: Server, pool_kind: str) -> None:
    """Lua mode with a pool of one connection: the subscription took it and the retry needed a
    second (ConnectionError at the pool timeout, or MaxConnectionsError at once)."""
    if pool_kind == "blocking":
        pool: Any = redis.BlockingConnectionPool(port=plain_server.port, max_connections=1, timeout=2)
    else:
        pool = redis.ConnectionPool(port=plain_server.port, max_connections=1)
    r = redis.Redis(connection_pool=pool)
    locks = redislock.LockClient(r, lease=5.0, mode="lua")
    try:
        holder = locks.lock("one-conn", owner="holder")
        assert holder.acquire(lease=1.0)  # freed after 1 s
        lock = locks.lock("one-conn")
        started = time.monotonic()
        assert lock.acquire(timeout=5) is True
        assert 0.8 < time.monotonic() - started < 3
        lock.release()
        in_step(r)
    finally:
        locks.close()
        r.close()


def test_two_waiters_two_connections(server: Server) -> None:
    """Two waiters and a pool of two connections: both get the lock in turn (in Lua mode one
    of them used to fail on the pool)."""
    pool = redis.BlockingConnectionPool(port=server.port, max_connections=2, timeout=2)
    r = redis.Redis(connection_pool=pool)
    locks = redislock.LockClient(r, lease=5.0)
    try:
        holder = locks.lock("two", owner="holder")
        assert holder.acquire(lease=0.5)
        results: list[Any] = []

        def wait() -> None:
            lock = locks.lock("two")
            try:
                got = lock.acquire(timeout=6)
                results.append(got)
                if got:
                    time.sleep(0.1)
                    lock.release()
            except Exception as error:  # pragma: no cover - reported below
                results.append(error)

        waiters = [threading.Thread(target=wait) for _ in range(2)]
        for w in waiters:
            w.start()
        for w in waiters:
            w.join(timeout=10)
        assert results == [True, True]
        in_step(r)
    finally:
        locks.close()
        r.close()


def test_multilock_hung_server_holds_no_pooled_connection(trio: list[Server]) -> None:
    """MultiLock against a SIGSTOPped server with socket_timeout=None: each attempt returned on
    time but left a thread blocked on a connection of the application's pool."""
    clients = [redislock.LockClient(s.client(socket_timeout=None), lease=5.0) for s in trio]
    try:
        for c in clients:
            assert c.mode == "module"
        trio[1].pause()
        multi = redislock.MultiLock([c.lock("mh") for c in clients])
        for _ in range(4):
            started = time.monotonic()
            assert multi.acquire(timeout=0.4) is False
            assert time.monotonic() - started < 0.4 + 0.5
        pool = clients[1].redis.connection_pool
        assert wait_until(lambda: not pool._in_use_connections, timeout=1), len(pool._in_use_connections)
        for c in (clients[0], clients[2]):
            assert not c.redis.connection_pool._in_use_connections
            in_step(c.redis)
    finally:
        trio[1].resume()
        for c in clients:
            c.close()


def test_interrupt_while_starting_the_watchdog_leaks_nothing(
    server: Server, r: redis.Redis, raw: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KeyboardInterrupt in the watchdog's Thread.start() after the hold was recorded: the
    caller never learnt it held the lock, which stayed held and renewed for the life of the
    process. (The interrupt is raised where a real SIGINT lands: in Thread.start's wait.)"""
    start = threading.Thread.start

    def interrupted_start(self: threading.Thread) -> None:
        start(self)
        if self.name == "redislock-watchdog":
            raise KeyboardInterrupt

    locks = redislock.LockClient(r, lease=0.6)
    try:
        lock = locks.lock("wd-intr")
        monkeypatch.setattr(threading.Thread, "start", interrupted_start)
        with pytest.raises(KeyboardInterrupt):
            lock.acquire()
        monkeypatch.undo()
        assert believed(lock) == 0
        time.sleep(1.0)  # more than a lease: a leaked hold would still be there, renewed
        assert raw.exists("wd-intr") == 0
        assert lock.acquire(blocking=False)
        lock.release()
        in_step(r)
    finally:
        monkeypatch.undo()
        locks.close()


def _interrupt_at(line: int) -> Any:
    """A trace function raising KeyboardInterrupt at the ``line``-th line run in redislock's own
    code: an interrupt at every point of a call, one point per run."""
    seen = [0]

    def trace(frame: Any, event: str, arg: Any) -> Any:
        if "redislock" not in frame.f_code.co_filename or "tests" in frame.f_code.co_filename:
            return None
        # Not inside the short mutex-held sections (the book, the engine's tables): a trace
        # function raising at a `with` block's exit line skips its __exit__, which no signal does.
        if isinstance(frame.f_locals.get("self"), Registry) or frame.f_code.co_name in ("own", "ensure_watchdog"):
            return None
        if event == "line":
            seen[0] += 1
            if seen[0] == line:
                sys.settrace(None)
                raise KeyboardInterrupt
        return trace

    return trace


def _traced(call: Any, line: int) -> tuple[bool, Any]:
    """Run ``call`` with an interrupt at its ``line``-th line: (interrupted, result)."""
    sys.settrace(_interrupt_at(line))
    try:
        return False, call()
    except KeyboardInterrupt:
        return True, None
    finally:
        sys.settrace(None)


def test_interrupt_anywhere_in_release_gives_the_hold_back(server: Server, r: redis.Redis, raw: redis.Redis) -> None:
    """A KeyboardInterrupt at any point of release() (14 points before the command is sent used
    to leave the hold renewed forever): the hold is given back, on the book and the server."""
    locks = redislock.LockClient(r, lease=0.6)
    try:
        lock = locks.lock("rel-intr")
        # From the third line: the first two are the call and the `try:` guarding the rest of
        # release(); an interrupt there is one before release() began.
        for line in range(3, 400):
            assert lock.acquire()
            interrupted, _ = _traced(lock.release, line)
            assert believed(lock) == 0, line
            assert wait_until(lambda: raw.exists("rel-intr") == 0, timeout=2), (line, raw.hgetall("rel-intr"))
            if not interrupted:
                break
        else:
            pytest.fail("release() was interrupted at every point tried")
        assert line > 10, line
        in_step(r)
    finally:
        locks.close()


def test_interrupt_anywhere_in_acquire_leaks_nothing(server: Server, r: redis.Redis, raw: redis.Redis) -> None:
    """A KeyboardInterrupt at any point of acquire(): either the caller holds the lock (acquire
    returned True) or nothing is held, on the book or the server, and nothing is renewed."""
    locks = redislock.LockClient(r, lease=0.6)
    try:
        lock = locks.lock("acq-intr")
        for line in range(1, 600):
            interrupted, got = _traced(lambda: lock.acquire(timeout=1), line)
            if not interrupted:
                assert got is True
                lock.release()
                break
            assert believed(lock) == 0, line
            assert wait_until(lambda: raw.exists("acq-intr") == 0, timeout=2), (line, raw.hgetall("acq-intr"))
        else:
            pytest.fail("acquire() was interrupted at every point tried")
        assert line > 10, line
        in_step(r)
    finally:
        locks.close()


def test_renewal_stops_for_ended_threads_and_dropped_locks(server: Server, r: redis.Redis, raw: redis.Redis) -> None:
    """Holds nobody can release any more are not renewed (they expire after their lease): the
    thread of a default owner ended, or the Lock object was garbage-collected."""
    locks = redislock.LockClient(r, lease=0.6)
    try:
        t = threading.Thread(target=lambda: locks.lock("by-thread").acquire())
        t.start()
        t.join()
        assert locks.lock("dropped").acquire()  # the Lock object is gone at once
        gc.collect()
        kept = locks.lock("kept")
        assert kept.acquire()
        assert raw.exists("by-thread") == 1 and raw.exists("dropped") == 1
        assert wait_until(lambda: raw.exists("by-thread") == 0 and raw.exists("dropped") == 0, timeout=3)
        assert kept.owned() and raw.pttl("kept") > 0  # the others are renewed as before
        kept.release()
    finally:
        locks.close()


def test_max_hold_caps_renewal(server: Server, r: redis.Redis, raw: redis.Redis) -> None:
    lost = threading.Event()
    locks = redislock.LockClient(r, lease=0.6, max_hold=1.2)
    try:
        capped = locks.lock("capped", on_lost=lost.set)
        free = locks.lock("uncapped", max_hold=None)
        started = time.monotonic()
        assert capped.acquire() and free.acquire()
        time.sleep(0.8)  # past the first lease: still renewed
        assert raw.exists("capped") == 1
        assert lost.wait(timeout=2)
        assert 1.1 < time.monotonic() - started < 1.8
        assert wait_until(lambda: raw.exists("capped") == 0, timeout=1)
        assert not capped.owned()
        with pytest.raises(redislock.NotOwnedError):
            capped.release()
        assert free.owned()
        free.release()
        with pytest.raises(ValueError):
            locks.lock("x", max_hold=0)
        with pytest.raises(ValueError):
            redislock.LockClient(r, max_hold=-1)
    finally:
        locks.close()
