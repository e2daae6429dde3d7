"""The API additions of client.md section 5: extend(), the lock's own timeout and LockTimeout,
bytes names, constructor type checks, reentrant fencing keeps the token."""

from __future__ import annotations

import threading
import time

import pytest
import redis
import redis.asyncio
from conftest import Server, wait_until

import redislock
import redislock.asyncio as ral


def test_extend(locks: redislock.LockClient, r: redis.Redis) -> None:
    """redis-py's extend(additional_time, replace_ttl=False): adds to the lease left, or sets it."""
    lock = locks.lock("ext")
    with pytest.raises(redislock.NotOwnedError):
        lock.extend(5)
    assert lock.acquire(lease=1.0)
    lock.extend(20, replace_ttl=True)
    assert 19 < r.pttl("ext") / 1000 <= 20
    lock.extend(10)  # added to what is left
    assert 29 < r.pttl("ext") / 1000 <= 30
    r.pexpire("ext", 200)
    lock.extend(0.2)
    assert 0.3 < r.pttl("ext") / 1000 <= 0.4
    assert wait_until(lambda: r.exists("ext") == 0, timeout=2)  # 0.4 s was all that was left
    assert lock.acquire(lease=0.3)
    lock.extend(20, replace_ttl=True)
    time.sleep(0.4)  # past the first lease: the extended one holds
    assert lock.owned()
    with pytest.raises(ValueError):
        lock.extend(0)
    with pytest.raises(ValueError):
        lock.extend(float("inf"))
    lock.release()
    with pytest.raises(redislock.NotOwnedError):
        lock.extend(5)
    assert r.exists("ext") == 0


def test_lock_timeout_default_and_lock_timeout_error(locks: redislock.LockClient, r: redis.Redis) -> None:
    holder = locks.lock("lt", owner="holder")
    assert holder.acquire(lease=10)
    lock = locks.lock("lt", timeout=0.3)
    started = time.monotonic()
    assert lock.acquire() is False  # the lock's own default wait
    assert 0.25 < time.monotonic() - started < 1.5
    assert lock.acquire(blocking=False) is False  # non-blocking ignores the default
    with pytest.raises(redislock.LockTimeout), lock:
        pass  # pragma: no cover
    assert issubclass(redislock.LockTimeout, redislock.LockError)
    holder.release()
    with lock:
        assert lock.owned()
    assert r.exists("lt") == 0
    with pytest.raises(ValueError):
        locks.lock("lt", timeout=-1)


def test_bytes_names_are_the_same_lock(locks: redislock.LockClient, r: redis.Redis) -> None:
    by_str, by_bytes = locks.lock("bytes:é"), locks.lock("bytes:é".encode())
    assert by_bytes.name == "bytes:é"
    assert by_str.acquire()
    assert by_bytes.hold_count() == 1  # same key, same owner
    assert by_bytes.acquire(blocking=False)
    assert r.hget("bytes:é", by_str.owner) == b"2"
    by_bytes.release()
    by_str.release()
    assert r.exists("bytes:é") == 0
    with pytest.raises(ValueError):
        locks.lock(b"\xff\xfe")
    with pytest.raises(ValueError):
        locks.lock(b"")


def test_constructor_type_checks(server: Server) -> None:
    for wrong in ("localhost", None, redis.asyncio.Redis(port=server.port), redis.ConnectionPool()):
        with pytest.raises(TypeError):
            redislock.LockClient(wrong)
    with pytest.raises(TypeError):
        ral.LockClient(redis.Redis(port=server.port))


def test_reentrant_acquire_keeps_the_token(locks: redislock.LockClient) -> None:
    lock = locks.lock("tok", fenced=True)
    assert lock.acquire()
    first = lock.token
    assert first is not None
    for _ in range(3):
        assert lock.acquire(blocking=False)
        assert lock.token == first
    for _ in range(3):
        lock.release()
        assert lock.token == first
    lock.release()
    assert lock.token is None
    assert lock.acquire()
    assert lock.token is not None and lock.token > first
    lock.release()


def test_owners_are_unique_per_thread(locks: redislock.LockClient) -> None:
    lock = locks.lock("own")
    seen: set[str] = set()

    def record() -> None:
        seen.add(lock.owner)

    for _ in range(20):
        t = threading.Thread(target=record)
        t.start()
        t.join()
    assert len(seen) == 20 and lock.owner not in seen


def test_errors_are_redis_py_lock_errors(locks: redislock.LockClient) -> None:
    """Code written for redis-py's Lock catches redis.exceptions.LockError (what redis-py
    raises when blocking_timeout runs out): ours are that too."""
    for error in (redislock.LockError, redislock.LockTimeout, redislock.NotOwnedError, redislock.ReplicaSyncError):
        assert issubclass(error, redis.exceptions.LockError)
    assert issubclass(redislock.NotOwnedError, redis.exceptions.LockNotOwnedError)
    holder = locks.lock("rp-err", owner="holder")
    assert holder.acquire(lease=5)
    with pytest.raises(redis.exceptions.LockError), locks.lock("rp-err", timeout=0.1):
        pass  # pragma: no cover
    holder.release()


def test_constructor_checks(server: Server) -> None:
    locks = redislock.LockClient(redis.Redis(port=1), mode="lua")  # nothing listens: nothing may be sent
    alocks = ral.LockClient(redis.asyncio.Redis(port=1), mode="lua")
    for client in (locks, alocks):
        with pytest.raises(TypeError):
            client.lock("k", on_lost=42)  # type: ignore[arg-type]
        client.lock("k", on_lost=print)  # any callable
    for multi, lock in (
        (redislock.MultiLock, locks.lock),
        (redislock.RedLock, locks.lock),
        (ral.MultiLock, alocks.lock),
    ):
        for wrong in (["str"], "abc", [None], [alocks.lock("k")] if multi is not ral.MultiLock else [locks.lock("k")]):
            with pytest.raises(TypeError):
                multi(wrong)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            multi([])
        multi([lock("a"), lock("b")])  # type: ignore[arg-type]
        multi(lock(n) for n in "ab")  # type: ignore[arg-type]


def test_multilock_timeout_for_with(locks: redislock.LockClient, r: redis.Redis) -> None:
    other = locks.lock("mw:2", owner="other")
    assert other.acquire(lease=5)
    multi = redislock.MultiLock([locks.lock("mw:1"), locks.lock("mw:2")], timeout=0.3)
    started = time.monotonic()
    with pytest.raises(redislock.LockTimeout), multi:
        pass  # pragma: no cover
    assert 0.25 < time.monotonic() - started < 2
    assert r.exists("mw:1") == 0
    other.release()
    with multi:
        assert r.exists("mw:1") == 1 and r.exists("mw:2") == 1
    assert r.exists("mw:1") == 0 and r.exists("mw:2") == 0


def test_synchronized_decorator(locks: redislock.LockClient, r: redis.Redis) -> None:
    @locks.synchronized("dec", timeout=0.2)
    def work(x: int) -> tuple[int, bytes | None]:
        """Doc kept."""
        return x * 2, r.hget("dec", work.lock.owner)  # type: ignore[attr-defined]

    assert work(21) == (42, b"1")
    assert work.__doc__ == "Doc kept." and work.__name__ == "work"
    assert r.exists("dec") == 0
    holder = locks.lock("dec", owner="holder")
    assert holder.acquire(lease=5)
    with pytest.raises(redislock.LockTimeout):
        work(1)
    holder.release()

    async def coroutine() -> None:  # pragma: no cover
        pass

    with pytest.raises(TypeError):
        locks.synchronized("dec")(coroutine)


async def test_synchronized_decorator_asyncio(server: Server) -> None:
    ar = redis.asyncio.Redis(port=server.port)
    alocks = ral.LockClient(ar, lease=5.0)
    try:

        @alocks.synchronized("adec", timeout=0.2, lease=2)
        async def work() -> int:
            return int(await ar.pttl("adec"))

        assert 0 < await work() <= 2000  # held with the fixed lease
        assert await ar.exists("adec") == 0
        with pytest.raises(TypeError):
            alocks.synchronized("adec")(lambda: None)
    finally:
        await alocks.close()
        await ar.aclose()
