"""Watchdog renewal and loss, sync_replicas with a live and a stopped replica, fencing tokens."""

from __future__ import annotations

import gc
import signal
import threading
import time
import weakref

import pytest

import redislock


def wait_until(pred, limit: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.01)
    return False


def test_watchdog_renews_until_release(server) -> None:
    locks = redislock.LockClient(server.client(), lease=0.6)
    lock = locks.lock("wd")
    assert lock.acquire()
    time.sleep(1.5)  # 2.5 leases: only renewals keep it
    assert lock.owned()
    assert 0 < lock.ttl() <= 0.6
    lock.release()
    assert not lock.locked()
    locks.close()


def test_lost_lock_calls_on_lost_once_and_release_raises(server) -> None:
    lost: list[redislock.Lock] = []
    locks = redislock.LockClient(server.client(), lease=0.3)
    lock = locks.lock("gone", on_lost=lost.append)
    assert lock.acquire()
    server.client().delete("gone")  # force-released behind its back
    assert wait_until(lambda: lost == [lock], 5)
    time.sleep(0.4)
    assert lost == [lock], "called once"
    assert not lock.owned()
    with pytest.raises(redislock.NotOwnedError):
        lock.release()
    locks.close()


def test_renewals_are_batched_in_one_round_trip(module_server) -> None:
    locks = redislock.LockClient(module_server.client(), lease=0.3)
    held = [locks.lock(f"b{i}") for i in range(20)]
    for lk in held:
        assert lk.acquire()
    r = module_server.client()
    r.config_resetstat()
    time.sleep(0.5)
    stats = r.info("commandstats")
    assert stats["cmdstat_lock.renew"]["calls"] >= 20
    for lk in held:
        lk.release()
    locks.close()


def test_connection_errors_are_retried_next_tick(make_server) -> None:
    s = make_server(True)
    locks = redislock.LockClient(s.client(), lease=0.6)
    lost: list[object] = []
    lock = locks.lock("flaky", on_lost=lost.append)
    assert lock.acquire()
    s.signal(signal.SIGSTOP)  # renewals time out / fail for a moment
    time.sleep(0.3)
    s.signal(signal.SIGCONT)
    time.sleep(0.8)
    assert lost == [] and lock.owned()
    lock.release()
    locks.close()


def test_close_and_garbage_collection_stop_the_thread(server) -> None:
    locks = redislock.LockClient(server.client(), lease=0.3)
    lk = locks.lock("x")
    assert lk.acquire()
    assert any(t.name == "redislock-watchdog" for t in threading.enumerate())
    locks.close()
    assert wait_until(lambda: not any(t.name == "redislock-watchdog" for t in threading.enumerate()))
    locks2 = redislock.LockClient(server.client(), lease=0.3)
    assert locks2.lock("y").acquire()
    ref = weakref.ref(locks2)
    del locks2
    gc.collect()
    assert wait_until(
        lambda: ref() is None and not any(t.name == "redislock-watchdog" for t in threading.enumerate())
    )


@pytest.mark.parametrize("mode", ["module", "lua"])
def test_sync_replicas_live_and_stopped(make_server, mode) -> None:
    master = make_server(mode == "module")
    replica = make_server(False)
    replica.replicate_from(master)
    locks = redislock.LockClient(master.client(), mode=mode)
    lock = locks.lock("durable", sync_replicas=1, sync_timeout=0.5)
    assert lock.acquire()
    assert replica.client().hexists("durable", lock.owner), "the replica has the hold"
    lock.release()
    replica.signal(signal.SIGSTOP)
    try:
        with pytest.raises(redislock.ReplicaSyncError) as e:
            lock.acquire()
        assert (e.value.acked, e.value.wanted) == (0, 1)
        assert not master.client().exists("durable"), "released again"
        with pytest.raises(redislock.ReplicaSyncError):
            locks.lock("durable2", sync_replicas=1, sync_timeout=0.2).acquire(blocking=False)
    finally:
        replica.signal(signal.SIGCONT)
    locks.close()


def test_fencing_tokens_strictly_increase(server, mode) -> None:
    locks = redislock.LockClient(server.client())
    lock = locks.lock("fenced", fenced=True)
    seen = []
    for _ in range(20):
        assert lock.acquire()
        assert lock.token is not None
        seen.append(lock.token)
        lock.release()
        assert lock.token is None
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
    assert lock.acquire()
    t1 = lock.token
    assert lock.acquire(), "reentry issues a new token"
    assert lock.token is not None and t1 is not None and lock.token > t1
    stored = int(server.client().get("redisson_lock_token:{fenced}"))
    assert stored == lock.token
    lock.release()
    lock.release()
    plain = locks.lock("fenced")
    assert plain.acquire() and plain.token is None
    plain.release()
    locks.close()


def test_fenced_module_and_lua_clients_share_one_sequence(module_server) -> None:
    m = redislock.LockClient(module_server.client(), mode="module")
    lua = redislock.LockClient(module_server.client(), mode="lua")
    tokens = []
    for i in range(10):
        lk = (m if i % 2 else lua).lock("seq", fenced=True)
        assert lk.acquire()
        tokens.append(lk.token)
        lk.release()
    assert tokens == sorted(tokens) and len(set(tokens)) == 10
    m.close()
    lua.close()
