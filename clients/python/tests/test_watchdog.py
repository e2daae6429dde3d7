"""The watchdog: renewal, batching, loss (on_lost once), connection errors, close and GC."""

from __future__ import annotations

import gc
import threading
import time

import pytest
import redis
from conftest import Server, wait_until

import redislock


def watchdog_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "redislock-watchdog"]


def evalsha_calls(r: redis.Redis) -> int:
    return int(r.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


def test_renews_every_kept_lock(server: Server, r: redis.Redis) -> None:
    locks = redislock.LockClient(r, lease=0.6)  # renewed every 0.2 s
    try:
        first, second = locks.lock("wd:1"), locks.lock("wd:2")
        assert first.acquire() and second.acquire()
        before = evalsha_calls(r)
        time.sleep(1.5)  # two and a half leases: only renewal keeps them
        for key in ("wd:1", "wd:2"):
            assert r.hget(key, first.owner) == b"1"
            assert r.pttl(key) > 200
        if not server.module:  # one Lua renew per tick for both locks: batched
            assert evalsha_calls(r) - before <= 8
        first.release()
        second.release()
        assert r.exists("wd:1", "wd:2") == 0
    finally:
        locks.close()


def test_fixed_lease_is_not_renewed(r: redis.Redis) -> None:
    locks = redislock.LockClient(r, lease=0.6)
    try:
        lock = locks.lock("fixed")
        assert lock.acquire(lease=0.4)
        assert wait_until(lambda: r.exists("fixed") == 0, timeout=3)
    finally:
        locks.close()


@pytest.mark.parametrize("callback_style", ["with lock", "no argument"])
def test_loss_calls_on_lost_once(server: Server, r: redis.Redis, callback_style: str) -> None:
    calls: list[object] = []
    lost = threading.Event()

    def with_lock(lock: object) -> None:
        calls.append(lock)
        lost.set()

    def no_argument() -> None:
        calls.append(None)
        lost.set()

    locks = redislock.LockClient(r, lease=0.6)
    try:
        lock = locks.lock("lost", on_lost=with_lock if callback_style == "with lock" else no_argument)
        assert lock.acquire()
        if server.module:
            assert r.execute_command("LOCK.FORCERELEASE", "lost") == 1
        else:
            assert r.delete("lost") == 1
        assert lost.wait(timeout=3)
        assert not lock.owned()
        assert lock.token is None
        time.sleep(0.6)  # three more ticks: still called once
        assert calls == ([lock] if callback_style == "with lock" else [None])
        with pytest.raises(redislock.NotOwnedError):
            lock.release()
        # the lock can be taken again and is renewed again
        assert lock.acquire()
        time.sleep(0.8)
        assert lock.owned()
        lock.release()
    finally:
        locks.close()


def test_taken_over_after_expiry_is_lost(r: redis.Redis) -> None:
    lost = threading.Event()
    locks = redislock.LockClient(r, lease=0.6)
    try:
        lock = locks.lock("stolen", on_lost=lambda _lock: lost.set())
        assert lock.acquire()
        r.delete("stolen")
        r.hset("stolen", "someone-else", 1)
        assert lost.wait(timeout=3)
        assert r.hgetall("stolen") == {b"someone-else": b"1"}
        with pytest.raises(redislock.NotOwnedError):
            lock.release()
        assert r.hgetall("stolen") == {b"someone-else": b"1"}
    finally:
        locks.close()


def test_connection_errors_retried_next_tick(server: Server) -> None:
    r = server.client(socket_timeout=0.2)
    lost = threading.Event()
    locks = redislock.LockClient(r, lease=2.4)  # renewed every 0.8 s
    try:
        lock = locks.lock("flaky", on_lost=lost.set)
        assert lock.acquire()
        server.pause()  # renewals time out for a while
        try:
            time.sleep(1.0)
        finally:
            server.resume()
        assert wait_until(lambda: r.pttl("flaky") > 2000, timeout=3)  # renewed again
        assert not lost.is_set()
        assert lock.owned()
        lock.release()
    finally:
        server.resume()
        locks.close()
        r.close()


def test_close_and_gc_stop_the_thread(r: redis.Redis) -> None:
    gc.collect()
    baseline = len(watchdog_threads())
    locks = redislock.LockClient(r, lease=3)
    lock = locks.lock("closing")
    assert lock.acquire()
    assert len(watchdog_threads()) == baseline + 1
    locks.close()
    assert len(watchdog_threads()) == baseline
    with pytest.raises(RuntimeError):
        lock.acquire()

    dropped = redislock.LockClient(r, lease=3)
    assert dropped.lock("gc").acquire()
    assert len(watchdog_threads()) == baseline + 1
    del dropped
    gc.collect()
    assert wait_until(lambda: len(watchdog_threads()) == baseline, timeout=5)


def renewals(server: Server, r: redis.Redis) -> int:
    """Renewals the server has run: LOCK.RENEW calls, or our Lua renew script's EVALSHA calls."""
    if server.module:
        return int(r.info("commandstats").get("cmdstat_lock.renew", {}).get("calls", 0))
    return evalsha_calls(r)


def test_each_hold_is_renewed_on_its_own_schedule(server: Server, r: redis.Redis) -> None:
    """Redisson renews a hold lease/3 after it was taken. One schedule started with the thread
    renewed a first hold right after its acquire, and later holds at the others' ticks (an extra
    round trip that also overwrote a longer lease another client had just set)."""
    raw = server.client(socket_timeout=5)
    locks = redislock.LockClient(r, lease=4.5)  # a hold is renewed 1.5 s after it was taken
    try:
        first = locks.lock("own:1")
        assert first.acquire()
        before = renewals(server, raw)
        time.sleep(0.3)
        assert renewals(server, raw) == before  # not renewed right after its acquire
        time.sleep(0.45)
        second = locks.lock("own:2")
        assert second.acquire()  # 0.75 s after the first
        raw.pexpire("own:2", 60_000)  # someone sets a longer lease
        time.sleep(0.9)  # 1.65 s after the first, 0.9 s after the second
        assert raw.pttl("own:1") < 4_500  # the first was renewed on its schedule...
        assert raw.pttl("own:2") > 50_000  # ...the second not yet: its own is 1.5 s after it
        assert wait_until(lambda: raw.pttl("own:2") < 4_600, timeout=1.5)  # then it is
        first.release()
        second.release()
    finally:
        locks.close()
        raw.close()
