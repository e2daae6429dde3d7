"""The blocking client under production faults (issue 17, client.md section 5), real servers.

Every test ends with the same two checks: the application's own connection still answers in
step (``SET``/``GET`` round-trip), and the server's keyspace matches what the client believes
(the registry of holds).
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from conftest import Server, lock_info, wait_until

import redislock


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
