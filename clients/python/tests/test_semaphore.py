"""The blocking client's semaphore (``locks.semaphore``) against real servers, both modes: layout,
permit counts, all-or-none, timeouts, leases, watchdog, lost permits, exactly-once release,
interop with a Redisson-script client, interrupts, stress, and the module's FIFO."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import redis
from conftest import free_port, wait_until
from sem_helpers import (
    NO_LEASE,
    ScriptClient,
    available,
    channel,
    held,
    module_has_semaphore,
    native_runs,
    native_scripts,
    now_ms,
    pick_server,
    scripts_native,
    zset,
)
from servers import Server
from test_faults import _traced

import redislock

NAME = "pool"


@pytest.fixture(params=["module", "lua"])
def sem_server(request: pytest.FixtureRequest) -> Server:
    return pick_server(request, request.param)


@pytest.fixture
def r(sem_server: Server) -> Iterator[redis.Redis]:
    client = sem_server.client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def locks(r: redis.Redis, sem_server: Server) -> Iterator[redislock.LockClient]:
    client = redislock.LockClient(r, lease=5.0)
    assert client.mode == ("module" if sem_server.module else "lua")
    try:
        yield client
    finally:
        client.close()


def settled(r: redis.Redis, total: int, name: str = NAME) -> bool:
    """Nothing held: every permit available, the zset empty."""
    return available(r, name) == total and held(r, name) == 0


def test_layout_and_set_permits(locks: redislock.LockClient, r: redis.Redis) -> None:
    untouched = locks.semaphore("untouched")
    assert r.exists("untouched") == 0  # permits=None: nothing sent
    assert untouched.available() == 0

    pubsub = r.pubsub()
    pubsub.subscribe(channel(NAME))
    assert pubsub.get_message(timeout=1) is not None  # the confirmation
    sem = locks.semaphore(NAME, permits=4)
    assert sem.mode == locks.mode
    assert r.get(NAME) == b"4"
    message = pubsub.get_message(timeout=2)
    assert message is not None and message["data"] == b"4"  # the permits are announced
    pubsub.close()
    assert locks.semaphore(NAME, permits=9).available() == 4  # only if absent (NX)
    assert sem.try_set_permits(7) is False

    p = sem.acquire(2)
    assert len(p.ids) == 2 and all(isinstance(i, bytes) and len(i) == 16 for i in p.ids)
    assert p.lease is None and not p.released
    scores = dict(r.zrange(zset(NAME), 0, -1, withscores=True))
    assert set(scores) == set(p.ids)
    for score in scores.values():  # the watchdog's lease (5 s) from now, in ms since the epoch
        assert now_ms() + 3000 < score <= now_ms() + 5500
    assert sem.available() == 2 and r.get(NAME) == b"2"

    sem.set_permits(6)  # the total: available + held
    assert sem.available() == 4
    sem.set_permits(1)  # fewer than held: available goes negative until permits return
    assert sem.available() == -1
    assert sem.try_acquire() is None
    p.release()
    assert sem.available() == 1 and held(r, NAME) == 0
    sem.set_permits(4)
    assert sem.available() == 4


def test_acquire_release_counts_and_all_or_none(locks: redislock.LockClient, r: redis.Redis) -> None:
    sem = locks.semaphore(NAME, permits=4)
    singles = [sem.acquire() for _ in range(3)]
    assert sem.available() == 1 and held(r, NAME) == 3
    before = r.zrange(zset(NAME), 0, -1)
    assert sem.try_acquire(2) is None  # all or none: the one available is not taken
    assert sem.available() == 1 and r.zrange(zset(NAME), 0, -1) == before
    last = sem.try_acquire(1)
    assert last is not None and sem.try_acquire(1) is None
    for p in [*singles, last]:
        p.release()
    assert settled(r, 4)
    with sem.acquire(permits=4) as p:
        assert sem.available() == 0 and held(r, NAME) == 4 and p.owned()
        assert sem.try_acquire() is None
    assert p.released and not p.owned()
    assert settled(r, 4)
    with pytest.raises(redislock.LockTimeout):
        sem.acquire(5, timeout=0)  # more than the total: never in time


def test_timeout_returns_and_raises(locks: redislock.LockClient, r: redis.Redis) -> None:
    sem = locks.semaphore(NAME, permits=2)
    holder = sem.acquire(2)
    t0 = time.monotonic()
    assert sem.try_acquire(timeout=0.3) is None
    assert 0.25 < time.monotonic() - t0 < 1.5
    t0 = time.monotonic()
    with pytest.raises(redislock.LockTimeout):
        sem.acquire(timeout=0.3)
    assert 0.25 < time.monotonic() - t0 < 1.5
    with pytest.raises(redislock.LockTimeout), sem.acquire(timeout=0.1):
        pytest.fail("not acquired")
    waiting = locks.semaphore(NAME, timeout=0.2)  # the default wait of acquire()
    with pytest.raises(redislock.LockTimeout):
        waiting.acquire()
    assert isinstance(redislock.LockTimeout("x"), redis.exceptions.LockError)
    assert held(r, NAME) == 2 and sem.available() == 0  # the timed-out waiters took nothing

    def release_later() -> None:
        time.sleep(0.3)
        holder.release()

    threading.Thread(target=release_later).start()
    t0 = time.monotonic()
    with sem.acquire(2, timeout=10) as p:  # woken by the release, not by a lease
        assert 0.25 < time.monotonic() - t0 < 2
        assert held(r, NAME) == 2 and p.owned()
    assert settled(r, 2)


def test_arguments_are_checked_before_anything_is_sent() -> None:
    """Every bad argument raises ValueError on a client whose server does not exist (so any
    command sent would be a ConnectionError instead)."""
    nowhere = redis.Redis(port=free_port(), socket_timeout=0.5)
    with redislock.LockClient(nowhere, mode="lua") as locks:
        sem = locks.semaphore(NAME)
        for permits in (0, -1, True, 1.5, "2", 100_001, None):
            with pytest.raises(ValueError):
                sem.acquire(permits)  # type: ignore[arg-type]
            with pytest.raises(ValueError):
                sem.try_acquire(permits)  # type: ignore[arg-type]
        for timeout in (-1, float("nan"), float("inf"), 1e9, "1"):
            with pytest.raises(ValueError):
                sem.acquire(timeout=timeout)
            with pytest.raises(ValueError):
                sem.try_acquire(timeout=timeout)  # type: ignore[arg-type]
        for lease in (0, -1, float("nan"), float("inf"), 1e9, "1"):
            with pytest.raises(ValueError):
                sem.acquire(lease=lease)  # type: ignore[arg-type]
        for total in (-1, 2**53, 1.0, True):
            with pytest.raises(ValueError):
                sem.set_permits(total)  # type: ignore[arg-type]
            with pytest.raises(ValueError):
                sem.try_set_permits(total)  # type: ignore[arg-type]
            with pytest.raises(ValueError):
                locks.semaphore(NAME, permits=total)  # type: ignore[arg-type]
        for name in ("", b"\xff", None):
            with pytest.raises(ValueError):
                locks.semaphore(name)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            locks.semaphore(NAME, timeout=-1)
        with pytest.raises(TypeError):
            locks.semaphore(NAME, on_lost=3)  # type: ignore[arg-type]
        with pytest.raises(redis.ConnectionError):
            sem.available()  # a valid call does go out


def test_fixed_lease_expires(locks: redislock.LockClient, r: redis.Redis) -> None:
    """A fixed lease is not renewed: the permits come back after it (lua mode: the next call
    returns them; module mode: the server does, see the module-only test below)."""
    sem = locks.semaphore(NAME, permits=4)
    p = sem.acquire(3, lease=0.3)
    assert p.lease == 0.3 and sem.available() == 1
    for score in r.zrange(zset(NAME), 0, -1, withscores=True):
        assert score[1] <= now_ms() + 300
    time.sleep(0.45)
    assert not p.owned()  # past its lease locally: no round trip needed
    assert sem.available() == 4 and held(r, NAME) == 0
    with pytest.raises(redislock.NotOwnedError):
        p.release()
    with pytest.raises(redislock.NotOwnedError):
        p.release()  # released once: the second is the double release

    # renew / extend a fixed lease
    q = sem.acquire(2, lease=0.3)
    q.extend(2.0)
    assert q.lease == 2.0
    time.sleep(0.45)
    assert q.owned() and sem.available() == 2
    q.renew()  # its own lease again (2 s)
    for _, score in r.zrange(zset(NAME), 0, -1, withscores=True):
        assert now_ms() + 1500 < score <= now_ms() + 2100
    q.release()
    assert settled(r, 4)
    with pytest.raises(redislock.NotOwnedError):
        q.renew()


def test_module_returns_expired_permits_on_time(locks: redislock.LockClient, r: redis.Redis) -> None:
    """Module mode: an expired permit returns at its deadline without any client call, and a
    server-side waiter is granted then."""
    if locks.mode != "module":
        pytest.skip("expiry on a server timer is the module's")
    sem = locks.semaphore(NAME, permits=2)
    sem.acquire(2, lease=0.3)
    t0 = time.monotonic()
    assert wait_until(lambda: r.get(NAME) == b"2" and r.zcard(zset(NAME)) == 0, timeout=1.5)
    assert time.monotonic() - t0 < 1.0
    sem.acquire(2, lease=0.3)
    t0 = time.monotonic()
    with sem.acquire(2, timeout=5) as p:  # waits in the server's queue for the expiry
        assert 0.2 < time.monotonic() - t0 < 1.0
        assert p.owned()
    info = sem.info()
    assert info["available"] == 2 and info["held"] == 0 and info["waiters"] == 0
    # A script client's permit (no LOCK.* call) is returned on time too.
    script = ScriptClient(r, NAME)
    reply, _ = script.try_acquire(2, lease_ms=300)
    assert reply == b"OK"
    assert wait_until(lambda: r.get(NAME) == b"2" and r.zcard(zset(NAME)) == 0, timeout=1.5)


def test_watchdog_keeps_a_permit_beyond_the_lease(r: redis.Redis, sem_server: Server) -> None:
    with redislock.LockClient(r, lease=1.0) as locks:
        sem = locks.semaphore(NAME, permits=3)
        p = sem.acquire(2)
        time.sleep(2.5)
        assert p.owned() and sem.available() == 1 and held(r, NAME) == 2
        for _, score in r.zrange(zset(NAME), 0, -1, withscores=True):
            assert now_ms() < score <= now_ms() + 1100
        p.renew(3.0)  # an explicit renewal of a kept permit
        p.release()
        assert settled(r, 3)
        time.sleep(0.6)  # no renewal of a released permit brings it back
        assert settled(r, 3)


def test_lost_permit_is_reported(r: redis.Redis, sem_server: Server) -> None:
    lost: list[object] = []
    with redislock.LockClient(r, lease=1.0) as locks:
        sem = locks.semaphore(NAME, permits=3, on_lost=lost.append)
        p = sem.acquire(2)
        other = sem.acquire(1)
        r.zrem(zset(NAME), p.ids[0])  # one of its ids is taken away
        assert wait_until(lambda: lost == [p], timeout=3)
        assert not p.owned() and other.owned()
        with pytest.raises(redislock.NotOwnedError):
            p.release()  # the id still held is given back anyway
        assert held(r, NAME) == 1
        other.release()
        assert lost == [p]


def test_lost_when_renewals_fail_for_a_lease(servers: list[Server], sem_server: Server) -> None:
    """A hung server: the permit is lost locally by lease + one renewal interval (owned() False
    without a round trip), on_lost fires; the watchdog does not stall the client."""
    server = Server(sem_server.module)
    servers.append(server)
    lost: list[float] = []
    with redislock.LockClient(server.client(socket_timeout=0.5), lease=1.0) as locks:
        sem = locks.semaphore(NAME, permits=2, on_lost=lambda: lost.append(time.monotonic()))
        p = sem.acquire()
        server.pause()
        t0 = time.monotonic()
        assert wait_until(lambda: lost, timeout=3)
        assert lost[0] - t0 < 1.0 + 0.5
        assert p.owned() is False  # no round trip: the server is stopped
        server.resume()
        with pytest.raises(redislock.NotOwnedError):
            p.release()
        assert wait_until(lambda: settled(server.client(), 2), timeout=3)


def test_release_exactly_once(locks: redislock.LockClient, r: redis.Redis) -> None:
    sem = locks.semaphore(NAME, permits=2)
    p = sem.acquire()
    sem.release(p)  # == p.release()
    assert p.released and sem.available() == 2
    with pytest.raises(redislock.NotOwnedError):
        p.release()
    with pytest.raises(redislock.NotOwnedError):
        sem.release(p)
    assert sem.available() == 2  # nothing counted twice
    other = locks.semaphore("other", permits=1)
    foreign = other.acquire()
    with pytest.raises(ValueError):
        sem.release(foreign)
    foreign.release()

    # Released from another thread than the one that took it (permits are not owned by threads).
    shared = sem.acquire(2)
    worker = threading.Thread(target=shared.release)
    worker.start()
    worker.join()
    assert shared.released and settled(r, 2)


def test_exit_of_a_released_permit_raises(locks: redislock.LockClient, r: redis.Redis) -> None:
    """Leaving ``with`` releases a second time: NotOwnedError, as a lock's; nothing counted twice."""
    sem = locks.semaphore(NAME, permits=1)
    with pytest.raises(redislock.NotOwnedError), sem.acquire() as p:
        p.release()
    assert settled(r, 1)


# Both directions on three servers: without the module (our Lua), with it (LOCK.SEM* beside
# Lua scripts), and with Redisson's semaphore scripts run natively (our Lua's SHA1s registered).
INTEROP = pytest.mark.parametrize("sem_server", ["module", "native", "lua"], indirect=True)


@INTEROP
def test_interop_script_client_holds_and_releases(locks: redislock.LockClient, r: redis.Redis) -> None:
    """A Redisson client's permits count for ours, and its release wakes our waiter."""
    script = ScriptClient(r, NAME)
    assert script.try_set_permits(4) == 1
    sem = locks.semaphore(NAME, permits=9)  # exists: unchanged
    assert sem.available() == 4
    reply, ids = script.try_acquire(3, lease_ms=30_000)
    assert reply == b"OK"
    assert sem.available() == 1 == script.available()
    assert sem.try_acquire(2) is None

    def release_later() -> None:
        time.sleep(0.3)
        assert script.release(ids[:2]) == 2

    threading.Thread(target=release_later).start()
    t0 = time.monotonic()
    p = sem.acquire(3, timeout=10)
    assert 0.25 < time.monotonic() - t0 < 2  # woken by the script's release
    assert script.available() == 0
    assert script.update_lease(ids[2], 60_000) == 1
    assert script.release(ids[2:]) == 1
    p.release()
    assert settled(r, 4)
    assert script.release(ids[2:]) == 0  # already released: nothing (all or nothing)
    if scripts_native(r):
        assert native_runs(r) >= 8


@INTEROP
def test_interop_script_client_waits_for_us(locks: redislock.LockClient, r: redis.Redis) -> None:
    """Our permits count for a Redisson client (busy replies ':<expiry>' for leased permits),
    and our release is announced on its channel."""
    sem = locks.semaphore(NAME, permits=2)
    script = ScriptClient(r, NAME)
    p = sem.acquire(2)  # the watchdog's lease: an expiry a Redisson client can wait for
    reply, _ = script.try_acquire(1)
    assert isinstance(reply, bytes) and reply.startswith(b":")
    assert 0 < int(float(reply[1:])) - now_ms() <= 5000
    pubsub = r.pubsub()
    pubsub.subscribe(script.channel)
    pubsub.get_message(timeout=1)
    p.release()
    message = pubsub.get_message(timeout=2)
    pubsub.close()
    assert message is not None and int(message["data"]) > 0
    reply, ids = script.try_acquire(2)  # no lease
    assert reply == b"OK" and r.zscore(zset(NAME), ids[0]) == NO_LEASE
    reply, _ = script.try_acquire(1)
    assert reply is None  # only permits without a lease are held: nil
    assert sem.try_acquire(timeout=0.2) is None
    assert script.release(ids) == 2
    q = sem.acquire(2, lease=0.3)
    time.sleep(0.45)  # expired: the script's next acquire counts them back first
    reply, ids = script.try_acquire(2, lease_ms=10_000)
    assert reply == b"OK"
    with pytest.raises(redislock.NotOwnedError):
        q.release()
    assert script.release(ids) == 2
    assert settled(r, 2)
    if scripts_native(r):
        assert native_runs(r) >= 8


def test_interrupt_anywhere_in_acquire_leaks_nothing(locks: redislock.LockClient, r: redis.Redis) -> None:
    """A KeyboardInterrupt at any point of acquire(): the caller has a permit, or nothing is
    held on the server (the ids the client generated are given back)."""
    sem = locks.semaphore(NAME, permits=3)
    for line in range(1, 600):
        interrupted, permit = _traced(lambda: sem.acquire(2, timeout=1), line)
        if not interrupted:
            assert permit is not None and permit.owned()
            permit.release()
            break
        assert wait_until(lambda: settled(r, 3), timeout=3), (line, r.get(NAME), r.zrange(zset(NAME), 0, -1))
    else:
        pytest.fail("acquire() was interrupted at every point tried")
    assert line > 10, line
    assert settled(r, 3)


def test_interrupt_anywhere_in_release_gives_the_permits_back(locks: redislock.LockClient, r: redis.Redis) -> None:
    sem = locks.semaphore(NAME, permits=3)
    for line in range(3, 400):
        permit = sem.acquire(2)
        interrupted, _ = _traced(permit.release, line)
        assert wait_until(lambda: settled(r, 3), timeout=3), (line, r.get(NAME), r.zrange(zset(NAME), 0, -1))
        if not interrupted:
            break
        with pytest.raises(redislock.NotOwnedError):
            permit.release()  # it counts as released
    else:
        pytest.fail("release() was interrupted at every point tried")
    assert line > 5, line


def test_stress_never_more_holders_than_permits(locks: redislock.LockClient, r: redis.Redis) -> None:
    sem = locks.semaphore("stress", permits=4)
    state = {"holders": 0, "most": 0, "grants": 0}
    guard = threading.Lock()
    errors: list[str] = []
    stop = time.monotonic() + 3.0

    def worker(n: int) -> None:
        while time.monotonic() < stop:
            want = 1 + n % 2
            with sem.acquire(want, timeout=20):
                with guard:
                    state["holders"] += want
                    state["grants"] += 1
                    state["most"] = max(state["most"], state["holders"])
                    if state["holders"] > 4:
                        errors.append(f"{state['holders']} permits held at once")
                time.sleep(0.002)
                with guard:
                    state["holders"] -= want
            time.sleep(0.001)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert state["grants"] > 16 and state["most"] >= 2, state
    assert sem.available() == 4 and settled(r, 4, "stress")


def test_module_fifo_no_barging(locks: redislock.LockClient, r: redis.Redis) -> None:
    """Module mode: waiters are granted in arrival order; a head that cannot be served blocks
    those behind it, and a non-waiting acquire does not take permits while waiters queue."""
    if locks.mode != "module":
        pytest.skip("server-side FIFO is the module's")
    sem = locks.semaphore(NAME, permits=4)
    holds = [sem.acquire() for _ in range(4)]
    order: list[str] = []
    guard = threading.Lock()
    taken: list[redislock.Permit] = []

    def take(who: str, want: int) -> None:
        p = sem.acquire(want, timeout=10)
        with guard:
            order.append(who)
            taken.append(p)

    threads = []
    for who, want in (("w1", 2), ("w2", 1), ("w3", 1)):
        t = threading.Thread(target=take, args=(who, want))
        t.start()
        threads.append(t)
        queued = len(threads)
        assert wait_until(lambda queued=queued: sem.info()["waiters"] == queued, timeout=3)
    holds[0].release()  # 1 available: the head (w1) needs 2, w2 behind it may not pass
    time.sleep(0.3)
    assert order == [] and sem.available() == 1
    assert sem.try_acquire() is None  # no barging past the queue either
    holds[1].release()
    assert wait_until(lambda: order == ["w1"], timeout=2), order
    holds[2].release()
    assert wait_until(lambda: order == ["w1", "w2"], timeout=2), order
    holds[3].release()
    for t in threads:
        t.join(10)
    assert order == ["w1", "w2", "w3"]
    for p in taken:
        p.release()
    assert settled(r, 4)


def test_semaphores_fall_back_to_lua_on_a_module_without_them(module_server: Server) -> None:
    """A module without LOCK.SEMACQUIRE (an older build): locks use the module, semaphores our
    Lua scripts on the same layout; with LOCK.SEMACQUIRE, semaphores use the module too."""
    with module_server.client() as r:
        r.flushall()
        locks = redislock.LockClient(r, lease=5.0)
        try:
            assert locks.mode == "module"
            sem = locks.semaphore(NAME, permits=2)
            assert sem.mode == ("module" if module_has_semaphore(module_server) else "lua")
            assert redislock.LockClient(r, mode="lua").semaphore(NAME).mode == "lua"
            with sem.acquire(2) as p:
                assert p.owned() and sem.available() == 0 and held(r, NAME) == 2
                with locks.lock("beside"):
                    assert r.hexists("beside", locks.lock("beside").owner)
            assert settled(r, 2)
        finally:
            locks.close()


def test_lua_client_on_native_scripts(native_server: Server) -> None:
    """A lua-mode client on a server that runs Redisson's semaphore scripts natively (our Lua's
    SHA1s registered): the same behaviour, the scripts run natively (sem-renew stays Lua)."""
    if not module_has_semaphore(native_server) or not native_scripts(native_server):
        pytest.skip("the module does not run Redisson's semaphore scripts natively")
    with native_server.client() as r:
        r.flushall()
        before = native_runs(r)
        with redislock.LockClient(r, lease=1.0, mode="lua") as locks:
            sem = locks.semaphore(NAME, permits=3)
            assert sem.mode == "lua" and r.get(NAME) == b"3"
            with sem.acquire(2) as p:
                assert sem.available() == 1 and sem.try_acquire(2) is None
                time.sleep(1.2)  # renewed (sem-renew, in Lua)
                assert p.owned()
            q = sem.acquire(3, lease=0.2)
            time.sleep(0.3)
            assert sem.available() == 3  # returned by the server's timer or the native script
            with pytest.raises(redislock.NotOwnedError):
                q.release()
            sem.set_permits(5)
            assert sem.available() == 5 and settled(r, 5)
        assert native_runs(r) - before >= 8
