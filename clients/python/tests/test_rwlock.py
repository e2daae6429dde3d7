"""The blocking client's read-write lock (``locks.rwlock``) against real servers, both modes."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import redis
from conftest import wait_until
from rw_helpers import ScriptClient, native_runs, pick_server
from servers import Server

import redislock

NAME = "catalog"


@pytest.fixture(params=["module", "lua"])
def rw_server(request: pytest.FixtureRequest) -> Server:
    return pick_server(request, request.param)


@pytest.fixture
def r(rw_server: Server) -> Iterator[redis.Redis]:
    client = rw_server.client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def locks(r: redis.Redis, rw_server: Server) -> Iterator[redislock.LockClient]:
    client = redislock.LockClient(r, lease=5.0)
    assert client.mode == ("module" if rw_server.module else "lua")
    try:
        yield client
    finally:
        client.close()


def fields(r: redis.Redis, name: str = NAME) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in r.hgetall(name).items()}


def in_thread(fn: object, *args: object) -> object:
    """Run ``fn`` in another thread (another default owner) and return its result."""
    out: list[object] = []
    worker = threading.Thread(target=lambda: out.append(fn(*args)))  # type: ignore[operator]
    worker.start()
    worker.join(30)
    return out[0]


def test_layout_and_reentrancy(locks: redislock.LockClient, r: redis.Redis) -> None:
    rw = locks.rwlock(NAME)
    owner = rw.read.owner
    assert rw.read.acquire() and rw.read.acquire()
    assert fields(r) == {"mode": "read", owner: "2"}
    assert r.exists(f"{{{NAME}}}:{owner}:rwlock_timeout:1", f"{{{NAME}}}:{owner}:rwlock_timeout:2") == 2
    assert rw.read.hold_count() == 2 and rw.read.owned() and rw.read.locked()
    assert not rw.write.locked() and not rw.write.owned() and rw.write.hold_count() == 0
    ttl = rw.read.ttl()
    assert ttl is not None and 4 < ttl <= 5
    rw.read.release()
    assert rw.read.hold_count() == 1
    rw.read.release()
    assert not r.exists(NAME)
    with pytest.raises(redislock.NotOwnedError):
        rw.read.release()

    assert rw.write.acquire() and rw.write.acquire()
    assert fields(r) == {"mode": "write", owner + ":write": "2"}
    assert rw.write.hold_count() == 2 and rw.write.owned() and rw.write.locked() and not rw.read.locked()
    rw.write.release()
    rw.write.release()
    assert not r.exists(NAME)
    with pytest.raises(redislock.NotOwnedError):
        rw.write.release()


def test_downgrade(locks: redislock.LockClient, r: redis.Redis) -> None:
    rw = locks.rwlock(NAME)
    other = locks.rwlock(NAME, owner="someone-else")
    with rw.write:
        assert rw.read.acquire(blocking=False)  # a writer may take read holds
        assert fields(r)["mode"] == "write"
        assert rw.read.locked()  # the writer's own read holds count as read-locked
        assert not other.read.acquire(blocking=False)
    assert fields(r) == {"mode": "read", rw.read.owner: "1"}  # downgraded
    assert other.read.acquire(blocking=False)
    assert not other.write.acquire(blocking=False)
    rw.read.release()
    other.read.release()
    assert not r.exists(NAME)


def test_no_upgrade(locks: redislock.LockClient, r: redis.Redis) -> None:
    rw = locks.rwlock(NAME)
    rw.read.acquire()
    assert rw.write.acquire(blocking=False) is False
    assert rw.write.acquire(timeout=0) is False
    with pytest.raises(redislock.UpgradeError):
        rw.write.acquire()
    with pytest.raises(redislock.UpgradeError):
        rw.write.acquire(timeout=5)
    # A pinned owner whose read hold this client does not know about: the server says so.
    stranger = locks.rwlock(NAME, owner=rw.read.owner + "-x")
    ScriptClient(r, NAME).read_lock()
    r.hset(NAME, rw.read.owner + "-x", 1)
    t0 = time.monotonic()
    with pytest.raises(redislock.UpgradeError):
        stranger.write.acquire(timeout=5)
    assert time.monotonic() - t0 < 2
    assert fields(r).get(rw.read.owner + "-x:write") is None
    rw.read.release()


def test_exclusion_and_waiting(locks: redislock.LockClient, r: redis.Redis) -> None:
    rw = locks.rwlock(NAME)
    holder = locks.rwlock(NAME, owner="w0")  # pinned: released from another thread
    assert holder.write.acquire()
    assert in_thread(rw.read.acquire, False) is False
    assert in_thread(rw.write.acquire, False) is False

    def release_later() -> None:
        time.sleep(0.3)
        holder.write.release()

    releaser = threading.Thread(target=release_later)
    t0 = time.monotonic()
    releaser.start()
    reader = locks.rwlock(NAME, owner="reader")
    assert reader.read.acquire(timeout=5)
    assert 0.25 < time.monotonic() - t0 < 3
    releaser.join()
    second = locks.rwlock(NAME, owner="reader-2")
    assert second.read.acquire(blocking=False)  # readers share
    writer = locks.rwlock(NAME, owner="writer")
    assert writer.write.acquire(timeout=0.2) is False

    def release_readers() -> None:
        time.sleep(0.3)
        reader.read.release()
        second.read.release()

    threading.Thread(target=release_readers).start()
    assert writer.write.acquire(timeout=5)
    assert fields(r) == {"mode": "write", "writer:write": "1"}
    writer.write.release()


def test_watchdog_renews_read_and_write_holds(r: redis.Redis, rw_server: Server) -> None:
    with redislock.LockClient(r, lease=1.0) as locks:
        rw = locks.rwlock(NAME)
        rw.read.acquire()
        rw.read.acquire()
        time.sleep(2.5)
        assert rw.read.owned() and rw.read.hold_count() == 2
        for n in (1, 2):
            assert r.pttl(f"{{{NAME}}}:{rw.read.owner}:rwlock_timeout:{n}") > 0
        rw.read.release()
        rw.read.release()
        w = locks.rwlock("w2")
        w.write.acquire()
        time.sleep(2.5)
        assert w.write.owned() and 0 < r.pttl("w2") <= 1000
        w.write.release()
        assert not r.exists("w2")


@pytest.mark.parametrize("side", ["read", "write"])
def test_lost_hold_is_reported(r: redis.Redis, rw_server: Server, side: str) -> None:
    lost: list[object] = []
    with redislock.LockClient(r, lease=1.0) as locks:
        rw = locks.rwlock(NAME, on_lost=lost.append)
        lock = rw.read if side == "read" else rw.write
        lock.acquire()
        r.delete(NAME)
        assert wait_until(lambda: lost == [lock], timeout=3)
        assert not lock.owned()
        with pytest.raises(redislock.NotOwnedError):
            lock.release()


def test_read_release_leaves_no_stale_book_entry(r: redis.Redis, rw_server: Server) -> None:
    """A read release replies 0 while another reader holds on, even for this owner's last hold:
    the book must not keep (and the watchdog must not report lost) a hold that is gone."""
    lost: list[object] = []
    with redislock.LockClient(r, lease=1.0) as locks:
        rw = locks.rwlock(NAME, on_lost=lost.append)
        other = locks.rwlock(NAME, owner="other")
        other.read.acquire()
        rw.read.acquire()
        rw.read.release()
        assert rw.read.token is None
        time.sleep(1.5)
        assert lost == []
        assert not rw.read.owned()
        other.read.release()


def test_fenced_write_tokens(locks: redislock.LockClient, r: redis.Redis) -> None:
    rw = locks.rwlock(NAME, fenced=True)
    tokens = []
    for _ in range(3):
        with rw.write as w:
            tokens.append(w.token)
            assert rw.write.acquire()  # re-entry keeps the hold's token
            assert rw.write.token == tokens[-1]
            rw.write.release()
            assert rw.read.acquire()
            assert rw.read.token is None
            rw.read.release()
    assert all(isinstance(t, int) for t in tokens)
    assert tokens == sorted(tokens) and len(set(tokens)) == 3
    plain = locks.lock(NAME + "-plain", fenced=True)
    with plain:
        assert plain.token is not None


def test_force_release(locks: redislock.LockClient, r: redis.Redis) -> None:
    rw = locks.rwlock(NAME)
    rw.write.acquire()
    assert rw.read.force_release() is False  # write-locked: the read side leaves it
    assert rw.write.force_release() is True
    assert not r.exists(NAME)
    rw.read.acquire()
    assert rw.write.force_release() is False
    assert rw.read.force_release() is True
    rw.read.acquire()
    assert rw.force_release() is True
    assert rw.force_release() is False
    assert not r.exists(NAME)


def test_fixed_lease_expired_release_raises(locks: redislock.LockClient, r: redis.Redis) -> None:
    rw = locks.rwlock(NAME)
    rw.read.acquire(lease=0.2)
    rw.write.acquire(blocking=False)  # no-op: read-locked
    time.sleep(0.4)
    with pytest.raises(redislock.NotOwnedError):
        rw.read.release()
    rw.write.acquire(lease=0.2)
    time.sleep(0.4)
    with pytest.raises(redislock.NotOwnedError):
        rw.write.release()


def scripts_native(r: redis.Redis) -> bool:
    """Whether this server runs Redisson's scripts natively (the "native" parameter)."""
    try:
        return r.config_get("lock.redisson-scripts").get("lock.redisson-scripts") == "native"
    except redis.ResponseError:
        return False


# Both directions on three servers: without the module (our Lua), with it (LOCK.* beside Lua
# scripts), and with Redisson's scripts run natively (our Lua's SHA1s registered as Redisson's).
INTEROP = pytest.mark.parametrize("rw_server", ["module", "native", "lua"], indirect=True)


@INTEROP
def test_interop_script_client_writer(locks: redislock.LockClient, r: redis.Redis) -> None:
    script = ScriptClient(r, NAME)
    assert script.write_lock() is None
    rw = locks.rwlock(NAME)
    assert rw.read.acquire(blocking=False) is False

    def unlock_later() -> None:
        time.sleep(0.3)
        assert script.write_unlock() == 1

    threading.Thread(target=unlock_later).start()
    t0 = time.monotonic()
    assert rw.read.acquire(timeout=10)
    assert time.monotonic() - t0 < 2  # woken by the unlock, not by the 30 s lease
    assert script.read_lock() is None  # readers share across clients
    assert isinstance(script.write_lock(), int)
    rw.read.release()
    assert script.read_unlock() == 1
    assert not r.exists(NAME)
    if scripts_native(r):
        assert native_runs(r) >= 5


@INTEROP
def test_interop_script_client_waits_for_us(locks: redislock.LockClient, r: redis.Redis) -> None:
    rw = locks.rwlock(NAME)
    script = ScriptClient(r, NAME)
    rw.write.acquire()
    assert isinstance(script.read_lock(), int) and isinstance(script.write_lock(), int)
    pubsub = r.pubsub()
    pubsub.subscribe(script.channel)
    pubsub.get_message(timeout=1)
    rw.write.release()
    message = pubsub.get_message(timeout=2)
    pubsub.close()
    if locks.mode == "lua":
        assert message is not None and message["data"] == b"1"  # a write unlock wakes every waiter
    assert script.write_lock() is None
    assert rw.read.acquire(blocking=False) is False
    assert script.write_unlock() == 1
    # A script reader's hold expiring lets our writer in (its timeout key counts, not its field).
    assert script.read_lock(lease_ms=300) is None
    t0 = time.monotonic()
    assert rw.write.acquire(timeout=5)
    assert time.monotonic() - t0 < 3
    rw.write.release()
    if scripts_native(r):
        assert native_runs(r) >= 5


def test_stress_readers_and_writers(locks: redislock.LockClient, r: redis.Redis) -> None:
    state = {"readers": 0, "writers": 0, "reads": 0, "writes": 0}
    guard = threading.Lock()
    errors: list[str] = []
    rw = locks.rwlock("stress")
    stop = time.monotonic() + 3.0

    def check(who: str) -> None:
        if state["writers"] > 1 or (state["writers"] and state["readers"]):
            errors.append(f"{who}: {state}")

    def reader() -> None:
        while time.monotonic() < stop:
            with rw.read:
                with guard:
                    state["readers"] += 1
                    state["reads"] += 1
                    check("reader")
                time.sleep(0.002)
                with guard:
                    state["readers"] -= 1
            time.sleep(0.005)  # lua mode has no fairness (as Redisson): gaps let writers in

    def writer() -> None:
        while time.monotonic() < stop:
            with rw.write:
                with guard:
                    state["writers"] += 1
                    state["writes"] += 1
                    check("writer")
                time.sleep(0.002)
                with guard:
                    state["writers"] -= 1
            time.sleep(0.001)

    threads = [threading.Thread(target=reader) for _ in range(8)] + [threading.Thread(target=writer) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert state["reads"] > 8 and state["writes"] >= 2, state
    assert not r.exists("stress")


def test_module_fifo_and_reader_batching(locks: redislock.LockClient, r: redis.Redis) -> None:
    if locks.mode != "module":
        pytest.skip("server-side FIFO is the module's")
    holder = locks.rwlock(NAME, owner="holder")
    holder.write.acquire()
    order: list[str] = []
    guard = threading.Lock()

    def take(owner: str, side: str, hold: float) -> None:
        lock = getattr(locks.rwlock(NAME, owner=owner), side)
        assert lock.acquire(timeout=10)
        with guard:
            order.append(owner)
        time.sleep(hold)
        lock.release()

    threads = []
    for owner, side in (("r1", "read"), ("r2", "read"), ("w1", "write"), ("r3", "read")):
        t = threading.Thread(target=take, args=(owner, side, 0.3))
        t.start()
        threads.append(t)
        time.sleep(0.1)  # arrival order
    holder.write.release()
    for t in threads:
        t.join(30)
    # r1 and r2 are granted together (a batch), then w1, then r3 (no barging past the writer).
    assert set(order[:2]) == {"r1", "r2"} and order[2:] == ["w1", "r3"], order
