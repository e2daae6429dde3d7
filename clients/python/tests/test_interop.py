"""One key shared by a module-mode client, a Lua-mode client and Redisson's algorithm (the
repository's own Lua implementation in lua/*.lua, run with EVAL)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from conftest import Server, lock_info, lua_script, wait_until

import redislock

JAVA = "6b1d2c1e-0000-4000-8000-00000000java:1"  # a Redisson-style owner id


@pytest.fixture
def shared(module_server: Server) -> Iterator[tuple[redis.Redis, redislock.LockClient, redislock.LockClient]]:
    r = module_server.client()
    r.flushall()
    module_client = redislock.LockClient(r, mode="module")
    lua_client = redislock.LockClient(r, mode="lua")
    try:
        yield r, module_client, lua_client
    finally:
        module_client.close()
        lua_client.close()
        r.close()


def redisson_acquire(r: redis.Redis, key: str, owner: str = JAVA, lease: int = 30000) -> Any:
    return r.eval(lua_script("acquire"), 1, key, lease, owner)


def redisson_unlock(r: redis.Redis, key: str, owner: str = JAVA) -> Any:
    channel = f"redisson_lock__channel:{{{key}}}"
    latch = f"redisson_unlock_latch:{{{key}}}:{uuid.uuid4().hex}"  # a new request id per unlock
    return r.eval(lua_script("unlock-latch"), 3, key, channel, latch, 0, 30000, owner, "PUBLISH", 16000)


def acquire_in_thread(lock: redislock.Lock, result: list[Any], owners: list[str] | None = None) -> threading.Thread:
    def run() -> None:
        if owners is not None:
            owners.append(lock.owner)
        result.append(lock.acquire(timeout=10))

    t = threading.Thread(target=run)
    t.start()
    return t


def test_module_waiter_gets_lock_freed_by_lua_client(shared: Any) -> None:
    r, module_client, lua_client = shared
    holder = lua_client.lock("mix")
    assert holder.acquire()
    result: list[bool] = []
    t = acquire_in_thread(module_client.lock("mix", owner="module-waiter"), result)
    assert wait_until(lambda: lock_info(r, "mix")["waiters"] == 1)  # waiters
    holder.release()  # a Lua DEL: the module grants its waiter
    t.join(timeout=10)
    assert result == [True] and r.hgetall("mix") == {b"module-waiter": b"1"}


def test_lua_waiter_woken_by_module_release(shared: Any) -> None:
    r, module_client, lua_client = shared
    holder = module_client.lock("mix2")
    assert holder.acquire()
    result: list[bool] = []
    t = acquire_in_thread(lua_client.lock("mix2", owner="lua-waiter"), result)
    assert wait_until(lambda: r.pubsub_numsub("redisson_lock__channel:{mix2}")[0][1] == 1)
    holder.release()  # LOCK.RELEASE publishes 0
    t.join(timeout=10)
    assert result == [True] and r.hgetall("mix2") == {b"lua-waiter": b"1"}


@pytest.mark.parametrize("mode", ["module", "lua"])
def test_redisson_holder_and_waiter(shared: Any, mode: str) -> None:
    r, module_client, lua_client = shared
    client = module_client if mode == "module" else lua_client
    key = f"java-{mode}"
    assert redisson_acquire(r, key) is None
    lock = client.lock(key)
    assert lock.acquire(blocking=False) is False
    result: list[bool] = []
    owners: list[str] = []
    t = acquire_in_thread(lock, result, owners)
    if mode == "module":
        assert wait_until(lambda: lock_info(r, key)["waiters"] == 1)
    else:
        assert wait_until(lambda: r.pubsub_numsub(f"redisson_lock__channel:{{{key}}}")[0][1] == 1)
    assert redisson_unlock(r, key) == 1
    t.join(timeout=10)
    assert result == [True]
    # now the Java side is the one that must wait, and our release wakes it with "0"
    pttl = redisson_acquire(r, key)
    assert isinstance(pttl, int) and pttl > 0
    pubsub = r.pubsub()
    pubsub.subscribe(f"redisson_lock__channel:{{{key}}}")
    assert pubsub.get_message(timeout=5)["type"] == "subscribe"  # type: ignore[index]
    renew = r.eval(lua_script("renew-batch"), 1, key, 30000, owners[0])
    assert renew == [1]  # Redisson's watchdog sees our hold in the same layout
    assert redisson_unlock(r, key) is None  # not Java's to unlock
    assert r.exists(key) == 1
    # the hold belongs to the waiter thread's owner id; release it as that owner
    client.lock(key, owner=owners[0]).release()
    message = pubsub.get_message(timeout=5)
    assert message is not None and message["data"] == b"0"
    assert redisson_acquire(r, key) is None
    pubsub.close()


def test_same_hold_through_both_clients(shared: Any) -> None:
    r, module_client, lua_client = shared
    via_module = module_client.lock("both", owner="app:1")
    via_lua = lua_client.lock("both", owner="app:1")
    assert via_module.acquire() and via_lua.acquire()  # one owner, reentrant across modes
    assert r.hgetall("both") == {b"app:1": b"2"}
    assert via_lua.hold_count() == 2
    via_module.release()
    via_lua.release()
    assert r.exists("both") == 0
