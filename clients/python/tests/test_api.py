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
