"""MultiLock / RedLock over three servers (one down), interop with Redisson-algorithm scripts,
and a multi-process mutual-exclusion stress test."""

from __future__ import annotations

import multiprocessing
import threading
import time
from pathlib import Path

import pytest
from redis.backoff import NoBackoff
from redis.retry import Retry

import redislock

REPO = Path(__file__).resolve().parents[3]


def fast_fail(s):  # type: ignore[no-untyped-def]
    """A client that gives up on a dead server at once (redis-py retries 3 times by default)."""
    return s.client(retry=Retry(NoBackoff(), 0), socket_connect_timeout=0.5)


def three(make_server, mode: str, lease: float = 30):  # type: ignore[no-untyped-def]
    servers = [make_server(mode == "module") for _ in range(3)]
    clients = [redislock.LockClient(fast_fail(s), lease=lease) for s in servers]
    return servers, clients


def test_multilock_all_or_nothing(make_server, mode) -> None:
    servers, clients = three(make_server, mode)
    m = redislock.MultiLock([c.lock("res") for c in clients])
    assert m.acquire()
    assert all(s.client().exists("res") for s in servers)
    m.release()
    assert not any(s.client().exists("res") for s in servers)
    # One component busy: nothing is left held, non-blocking gives False at once.
    other = redislock.LockClient(servers[1].client())
    busy = other.lock("res", owner="busy-owner")
    assert busy.acquire()
    assert m.acquire(blocking=False) is False
    assert not servers[0].client().exists("res") and not servers[2].client().exists("res")
    t0 = time.monotonic()
    assert m.acquire(timeout=0.3) is False
    assert time.monotonic() - t0 < 5
    # Freed during a blocking acquire: it gets all three.
    threading.Timer(0.2, busy.release).start()
    assert m.acquire(timeout=5)
    with pytest.raises(redislock.NotOwnedError):
        busy.release()
    m.release()
    for c in [*clients, other]:
        c.close()


def test_redlock_majority_with_one_server_down(make_server, mode) -> None:
    servers, clients = three(make_server, mode)
    servers[2].stop()
    r = redislock.RedLock([c.lock("res") for c in clients])
    t0 = time.monotonic()
    assert r.acquire(timeout=2)
    assert time.monotonic() - t0 < 2, "components were tried in parallel"
    assert servers[0].client().exists("res") and servers[1].client().exists("res")
    r.release()
    assert not servers[0].client().exists("res")
    m = redislock.MultiLock([c.lock("res2") for c in clients])
    assert m.acquire(blocking=False) is False, "MultiLock needs every server"
    assert not servers[0].client().exists("res2"), "the components taken were released"
    # Two of three down: no majority.
    servers[1].stop()
    assert redislock.RedLock([c.lock("res3") for c in clients]).acquire(blocking=False) is False
    assert not servers[0].client().exists("res3")
    for c in clients:
        c.close()


def test_redlock_validity_and_release_errors(make_server) -> None:
    servers, clients = three(make_server, "module")
    r = redislock.RedLock([c.lock("v") for c in clients])
    assert r.acquire(lease=5)
    servers[2].stop()
    with pytest.raises(Exception):  # noqa: B017 - the connection error of the stopped server
        r.release()
    assert not servers[0].client().exists("v") and not servers[1].client().exists("v"), (
        "released past the error"
    )
    assert redislock.RedLock([c.lock("v2") for c in clients]).acquire(blocking=False, lease=0.001) is False, (
        "no validity"
    )
    for c in clients:
        c.close()


def test_multilock_watchdog_renews_every_component(make_server) -> None:
    servers, clients = three(make_server, "lua", lease=0.6)
    m = redislock.MultiLock([c.lock("wd") for c in clients])
    with m:
        time.sleep(1.5)
        assert all(s.client().exists("wd") for s in servers)
    assert not any(s.client().exists("wd") for s in servers)
    for c in clients:
        c.close()


def test_module_lua_and_redisson_scripts_share_a_lock(module_server) -> None:
    r = module_server.client()
    acquire = r.register_script((REPO / "lua" / "acquire.lua").read_text())
    unlock = r.register_script((REPO / "lua" / "unlock_no_latch.lua").read_text())
    m = redislock.LockClient(module_server.client(), mode="module")
    lua = redislock.LockClient(module_server.client(), mode="lua")
    java = "11111111-2222-3333-4444-555555555555:1"
    assert acquire(keys=["k"], args=[30000, java]) is None, "a Redisson client takes it"
    assert m.lock("k").acquire(blocking=False) is False
    assert lua.lock("k").acquire(blocking=False) is False
    got: list[bool] = []
    th = threading.Thread(target=lambda: got.append(m.lock("k").acquire(timeout=10)))
    th.start()
    end = time.monotonic() + 5
    while r.info("lock")["lock_waiters"] != 1:
        assert time.monotonic() < end
        time.sleep(0.01)
    assert unlock(keys=["k", "redisson_lock__channel:{k}"], args=["0", 30000, java, "PUBLISH"]) == 1
    th.join(10)
    assert got == [True], "the module's waiter was served when the Redisson unlock freed it"
    owner = next(iter(r.hgetall("k")))
    assert owner.startswith(m.id.encode())
    assert r.execute_command("LOCK.FORCERELEASE", "k") == 1
    lk = lua.lock("k")
    assert lk.acquire()
    assert acquire(keys=["k"], args=[30000, java]) > 0, "Redisson sees the lua-mode client's hold"
    assert r.hget("k", lk.owner) == b"1"
    lk.release()
    assert acquire(keys=["k"], args=[30000, java]) is None
    m.close()
    lua.close()


def _worker(port: int, mode: str, n: int, result: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    import redis

    r = redis.Redis(port=port, socket_timeout=30)
    locks = redislock.LockClient(r, mode=mode)
    lock = locks.lock("counter-lock")
    bad = 0
    for _ in range(n):
        with lock:
            v = int(r.get("counter") or 0)
            if r.incr("inside") != 1:
                bad += 1
            r.set("counter", v + 1)
            r.decr("inside")
    locks.close()
    result.put(bad)


@pytest.mark.parametrize("mode", ["module", "lua"])
def test_processes_never_lose_an_increment(make_server, mode) -> None:
    s = make_server(mode == "module")
    procs, n = 4, 150
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=_worker, args=(s.port, mode, n, q)) for _ in range(procs)]
    for p in ps:
        p.start()
    for p in ps:
        p.join(120)
        assert p.exitcode == 0
    overlaps = sum(q.get(timeout=5) for _ in ps)
    assert overlaps == 0, "two processes were inside at once"
    assert int(s.client().get("counter")) == procs * n
