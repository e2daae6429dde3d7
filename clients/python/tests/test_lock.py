"""The blocking Lock API in both modes, asserted on replies and on the keyspace."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any, Callable

import pytest
import redis
from conftest import Server, lock_info, wait_until

import redislock


def other_thread(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in another thread (another owner); return its result or raise its error here."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as error:
            out.append(error)

    t = threading.Thread(target=run)
    t.start()
    t.join(timeout=30)
    assert not t.is_alive()
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


def test_client_identity(locks: redislock.LockClient) -> None:
    assert str(uuid.UUID(locks.id)) == locks.id
    assert locks.mode in ("module", "lua")
    assert redislock.LockClient(locks.redis, mode="lua").mode == "lua"


def test_acquire_release_layout(locks: redislock.LockClient, r: redis.Redis) -> None:
    lock = locks.lock("orders:42")
    owner = lock.owner  # <client id>:<number of this thread>
    assert owner.startswith(f"{locks.id}:")
    assert not lock.locked() and not lock.owned() and lock.hold_count() == 0 and lock.ttl() is None
    assert lock.acquire() is True
    assert r.hgetall("orders:42") == {owner.encode(): b"1"}
    assert 4000 < r.pttl("orders:42") <= 5000
    assert lock.locked() and lock.owned() and lock.hold_count() == 1
    ttl = lock.ttl()
    assert ttl is not None and 4 < ttl <= 5
    assert lock.token is None
    lock.release()
    assert r.exists("orders:42") == 0
    assert not lock.locked() and lock.ttl() is None


def test_reentrancy_and_owners(locks: redislock.LockClient, r: redis.Redis) -> None:
    lock = locks.lock("re")
    assert lock.acquire() and lock.acquire(blocking=False)
    assert lock.hold_count() == 2
    # another thread is another owner: it neither holds nor gets it
    assert other_thread(lambda: (lock.owned(), lock.hold_count(), lock.acquire(blocking=False))) == (False, 0, False)
    with pytest.raises(redislock.NotOwnedError):
        other_thread(lock.release)
    lock.release()
    assert lock.hold_count() == 1 and r.exists("re") == 1
    lock.release()
    assert r.exists("re") == 0
    with pytest.raises(redis.exceptions.LockNotOwnedError):  # what a redis-py Lock user catches
        lock.release()


def test_pinned_owner_moves_between_threads(locks: redislock.LockClient, r: redis.Redis) -> None:
    lock = locks.lock("job", owner="worker-7")
    assert lock.acquire()
    assert r.hgetall("job") == {b"worker-7": b"1"}
    other_thread(lock.release)  # same owner from another thread
    assert r.exists("job") == 0


def test_context_manager(locks: redislock.LockClient, r: redis.Redis) -> None:
    with locks.lock("ctx") as held:
        assert held.owned() and r.exists("ctx") == 1
    assert r.exists("ctx") == 0


def test_nonblocking_and_timeout(locks: redislock.LockClient) -> None:
    lock = locks.lock("busy", owner="holder")
    assert lock.acquire()
    contender = locks.lock("busy")
    started = time.monotonic()
    assert contender.acquire(blocking=False) is False
    assert contender.acquire(timeout=0) is False
    assert contender.acquire(timeout=0.3) is False
    elapsed = time.monotonic() - started
    assert 0.25 < elapsed < 2.0
    assert not contender.owned()


def test_waiter_gets_lock_on_release(locks: redislock.LockClient, server: Server, r: redis.Redis) -> None:
    holder = locks.lock("hand", owner="holder")
    assert holder.acquire()
    result: list[bool] = []
    waiter = threading.Thread(target=lambda: result.append(locks.lock("hand", owner="waiter").acquire(timeout=10)))
    waiter.start()
    if server.module:  # waiting server-side in the lock's FIFO queue, no polling
        assert wait_until(lambda: lock_info(r, "hand").get("waiters") == 1)
    else:  # waiting Redisson's way, subscribed to the release channel
        assert wait_until(lambda: r.pubsub_numsub("redisson_lock__channel:{hand}")[0][1] == 1)
    holder.release()
    waiter.join(timeout=10)
    assert result == [True]
    assert r.hgetall("hand") == {b"waiter": b"1"}


def test_module_fifo_order(module_server: Server) -> None:
    r = module_server.client()
    r.flushall()
    locks = redislock.LockClient(r)
    try:
        holder = locks.lock("fifo", owner="holder")
        assert holder.acquire()
        order: list[str] = []
        threads = []
        for i in range(3):
            name = f"w{i}"

            def run(name: str = name) -> None:
                lock = locks.lock("fifo", owner=name)
                assert lock.acquire(timeout=10)
                order.append(name)
                lock.release()

            threads.append(threading.Thread(target=run))
            threads[-1].start()
            assert wait_until(lambda i=i: lock_info(r, "fifo").get("waiters") == i + 1)
        holder.release()
        for t in threads:
            t.join(timeout=10)
        assert order == ["w0", "w1", "w2"]
    finally:
        locks.close()
        r.close()


def test_wait_outlasts_socket_timeout(server: Server) -> None:
    r = server.client(socket_timeout=0.3)
    r.flushall()
    locks = redislock.LockClient(r)
    try:
        holder = locks.lock("slow", owner="holder")
        assert holder.acquire(lease=1.0)  # expires after 1 s, longer than the socket timeout
        started = time.monotonic()
        assert locks.lock("slow", owner="waiter").acquire(timeout=5)
        assert 0.8 < time.monotonic() - started < 3
        assert r.hgetall("slow") == {b"waiter": b"1"}
        # and an unlimited wait too
        blocker = locks.lock("slow2", owner="holder")
        assert blocker.acquire(lease=0.8)
        assert locks.lock("slow2", owner="waiter").acquire()
    finally:
        locks.close()
        r.close()


def test_fixed_lease_expires(locks: redislock.LockClient, r: redis.Redis) -> None:
    lock = locks.lock("lease")
    assert lock.acquire(lease=0.3)
    assert 0 < r.pttl("lease") <= 300
    assert wait_until(lambda: r.exists("lease") == 0, timeout=3)
    with pytest.raises(redislock.NotOwnedError):
        lock.release()


def test_release_message_and_force_release(locks: redislock.LockClient, r: redis.Redis) -> None:
    pubsub = r.pubsub()
    pubsub.subscribe("redisson_lock__channel:{msg}")
    assert pubsub.get_message(timeout=5)["type"] == "subscribe"  # type: ignore[index]
    lock = locks.lock("msg")
    assert lock.acquire() and lock.acquire()
    lock.release()
    assert pubsub.get_message(timeout=0.2) is None  # still held: nothing announced
    lock.release()
    message = pubsub.get_message(timeout=5)
    assert message is not None and message["data"] == b"0"
    assert locks.lock("msg", owner="x").acquire()
    assert lock.force_release() is True
    message = pubsub.get_message(timeout=5)
    assert message is not None and message["data"] == b"0"
    assert r.exists("msg") == 0
    assert lock.force_release() is False
    pubsub.close()


def test_fencing_tokens(locks: redislock.LockClient, r: redis.Redis) -> None:
    lock = locks.lock("fence", fenced=True)
    tokens = []
    for _ in range(3):
        assert lock.acquire()
        assert lock.token is not None
        tokens.append(lock.token)
        lock.release()
        assert lock.token is None
    assert lock.acquire()
    first = lock.token
    assert lock.acquire()  # a reentrant acquire keeps the hold's token
    assert lock.token == first
    tokens.append(lock.token)
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)
    assert int(r.get("redisson_lock_token:{fence}")) >= tokens[-1]  # type: ignore[arg-type]
    assert locks.lock("fence", fenced=True, owner="other").acquire(blocking=False) is False
    lock.release()
    lock.release()
    # names with braces keep their own hash tag
    braced = locks.lock("{tag}x", fenced=True)
    assert braced.acquire()
    assert r.exists("redisson_lock_token:{tag}x") == 1
    braced.release()


def test_fencing_across_modes(module_server: Server) -> None:
    r = module_server.client()
    r.flushall()
    module_client = redislock.LockClient(r, mode="module")
    lua_client = redislock.LockClient(r, mode="lua")
    try:
        seen = []
        for client in (lua_client, module_client, lua_client, module_client):
            lock = client.lock("fx", fenced=True)
            assert lock.acquire()
            seen.append(lock.token)
            lock.release()
        assert seen == sorted(seen) and len(set(seen)) == 4
    finally:
        module_client.close()
        lua_client.close()
        r.close()


def test_server_errors_pass_through(locks: redislock.LockClient, r: redis.Redis) -> None:
    r.set("str", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        locks.lock("str").acquire()
    dead = redislock.LockClient(redis.Redis(port=1, socket_connect_timeout=0.5), mode="lua")
    with pytest.raises(redis.ConnectionError):
        dead.lock("k").acquire()
