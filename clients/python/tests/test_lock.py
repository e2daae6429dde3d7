"""The sync API in both modes: acquire/release, reentrancy, owners, reads, errors, waiting."""

from __future__ import annotations

import threading
import time

import pytest
import redis

import redislock


def test_mode_is_detected(server, locks, mode) -> None:
    assert locks.mode == mode
    assert len(locks.id) == 36


def test_acquire_release_layout_and_reentrancy(server, locks) -> None:
    r = server.client()
    lock = locks.lock("orders:42")
    assert not lock.locked()
    assert lock.acquire()
    owner = f"{locks.id}:{threading.get_ident()}"
    assert lock.owner == owner
    assert r.hgetall("orders:42") == {owner.encode(): b"1"}, "Redisson's layout"
    assert 29 < lock.ttl() <= 30
    assert lock.locked() and lock.owned()
    assert lock.acquire(blocking=False), "reentrant"
    assert lock.hold_count() == 2
    lock.release()
    assert lock.hold_count() == 1 and lock.owned()
    lock.release()
    assert not lock.locked() and not lock.owned()
    assert lock.hold_count() == 0 and lock.ttl() is None
    with pytest.raises(redislock.NotOwnedError):
        lock.release()
    with pytest.raises(redis.exceptions.LockNotOwnedError):  # redis-py's own class
        lock.release()


def test_release_publishes_the_message_redisson_waits_for(server, locks) -> None:
    sub = server.client().pubsub(ignore_subscribe_messages=True)
    sub.subscribe("redisson_lock__channel:{m}")
    lock = locks.lock("m")
    assert lock.acquire()
    lock.release()
    msg = None
    end = time.monotonic() + 5
    while msg is None and time.monotonic() < end:
        msg = sub.get_message(timeout=1)
    assert msg is not None and msg["data"] == b"0"
    sub.close()


def test_two_threads_are_two_owners_and_an_explicit_owner_is_one(server, locks) -> None:
    lock = locks.lock("t")
    assert lock.acquire(lease=30)
    got: list[bool] = []
    th = threading.Thread(target=lambda: got.append(lock.acquire(blocking=False)))
    th.start()
    th.join()
    assert got == [False], "another thread is another owner"
    lock.release()
    pinned = locks.lock("p", owner="job-7")
    assert pinned.acquire()
    th = threading.Thread(target=pinned.release)
    th.start()
    th.join()
    assert not pinned.locked(), "a pinned owner releases from any thread"


def test_timeouts_and_non_blocking(server, locks) -> None:
    other = redislock.LockClient(server.client())
    held = other.lock("busy")
    assert held.acquire()
    lock = locks.lock("busy")
    assert lock.acquire(blocking=False) is False
    t0 = time.monotonic()
    assert lock.acquire(timeout=0.3) is False
    assert 0.25 <= time.monotonic() - t0 < 5
    assert lock.acquire(timeout=0) is False
    held.release()
    assert lock.acquire(timeout=1)
    lock.release()
    other.close()


def test_blocking_acquire_gets_the_lock_when_released(server, locks) -> None:
    other = redislock.LockClient(server.client())
    held = other.lock("w")
    assert held.acquire()
    lock = locks.lock("w")
    result: list[bool] = []
    th = threading.Thread(target=lambda: result.append(lock.acquire(timeout=10)))
    th.start()
    time.sleep(0.2)
    assert result == []
    held.release()
    th.join(10)
    assert result == [True]
    # The waiter's thread holds it: release there is not possible from here.
    with pytest.raises(redislock.NotOwnedError):
        lock.release()
    assert lock.force_release()
    other.close()


def test_fixed_lease_expires_and_no_watchdog_renews_it(server, locks) -> None:
    lock = locks.lock("short")
    assert lock.acquire(lease=0.2)
    end = time.monotonic() + 5
    while lock.locked() and time.monotonic() < end:
        time.sleep(0.02)
    assert not lock.locked()
    with pytest.raises(redislock.NotOwnedError):
        lock.release()


def test_force_release_and_context_manager(server, locks) -> None:
    lock = locks.lock("f")
    assert lock.force_release() is False
    with pytest.raises(redislock.NotOwnedError), lock:
        assert lock.owned()
        assert lock.force_release() is True
    assert not lock.locked()


def test_context_manager_releases(server, locks) -> None:
    lock = locks.lock("cm")
    with lock:
        assert lock.hold_count() == 1
        with lock:
            assert lock.hold_count() == 2
        assert lock.hold_count() == 1
    assert not lock.locked()


def test_bad_arguments_raise_value_error_before_sending(server, locks) -> None:
    r = server.client()
    before = r.info("stats")["total_commands_processed"]
    for bad in [
        dict(timeout=-1),
        dict(lease=0),
        dict(lease=-3),
        dict(lease=float("nan")),
        dict(blocking=False, timeout=1),
    ]:
        with pytest.raises(ValueError):
            locks.lock("x").acquire(**bad)  # type: ignore[arg-type]
    for bad_name in ["", None, 5]:
        with pytest.raises(ValueError):
            locks.lock(bad_name)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        locks.lock("x", owner="")
    with pytest.raises(ValueError):
        locks.lock("x", sync_replicas=-1)
    with pytest.raises(ValueError):
        redislock.LockClient(r, lease=0)
    with pytest.raises(ValueError):
        redislock.LockClient(r, mode="fast")
    after = r.info("stats")["total_commands_processed"]
    assert after == before + 1, "only the INFO above reached the server"


def test_server_errors_pass_through(server, locks) -> None:
    server.client().set("str", "v")
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        locks.lock("str").acquire()


def test_fifo_order_with_the_module(module_server) -> None:
    locks = redislock.LockClient(module_server.client())
    assert locks.mode == "module"
    holder = locks.lock("q", owner="holder")
    assert holder.acquire()
    order: list[int] = []
    done = threading.Event()

    def waiter(i: int) -> None:
        lk = locks.lock("q", owner=f"w{i}")
        assert lk.acquire(timeout=20)
        order.append(i)
        lk.release()
        if i == 3:
            done.set()

    r = module_server.client()
    threads = []
    for i in range(4):
        th = threading.Thread(target=waiter, args=(i,))
        th.start()
        threads.append(th)
        end = time.monotonic() + 5
        while r.info("lock")["lock_waiters"] != i + 1:
            assert time.monotonic() < end
            time.sleep(0.01)
    holder.release()
    assert done.wait(20)
    for th in threads:
        th.join()
    assert order == [0, 1, 2, 3], "served in arrival order, server-side"
    locks.close()


def test_lua_mode_on_a_module_server_interoperates(module_server) -> None:
    m = redislock.LockClient(module_server.client(), mode="module")
    lua = redislock.LockClient(module_server.client(), mode="lua")
    a, b = m.lock("shared"), lua.lock("shared")
    assert a.acquire()
    assert b.acquire(blocking=False) is False
    got: list[bool] = []
    th = threading.Thread(target=lambda: got.append(b.acquire(timeout=10)))
    th.start()
    time.sleep(0.1)
    a.release()  # the module frees it and publishes 0: the lua-mode waiter wakes
    th.join(10)
    assert got == [True]
    m.close()
    lua.close()
