"""Mutual exclusion across processes: a read-modify-write counter must not lose an increment."""

from __future__ import annotations

import multiprocessing
import time

import pytest
import redis
from conftest import Server

import redislock

PROCESSES = 4
INCREMENTS = 40


def increment(port: int, mode: str, count: int) -> None:
    r = redis.Redis(port=port)
    locks = redislock.LockClient(r, lease=5, mode=mode)
    lock = locks.lock("stress:lock")
    for _ in range(count):
        with lock:
            value = int(r.get("stress:counter") or 0)
            time.sleep(0.0005)  # widen the race a lost update would need
            r.set("stress:counter", value + 1)
    locks.close()
    r.close()


@pytest.mark.parametrize(
    "modes", [("module",) * PROCESSES, ("lua",) * PROCESSES, ("module", "lua") * 2], ids=["module", "lua", "mixed"]
)
def test_no_lost_increment(module_server: Server, plain_server: Server, modes: tuple[str, ...]) -> None:
    server = plain_server if set(modes) == {"lua"} else module_server
    with server.client() as r:
        r.delete("stress:counter", "stress:lock")
        context = multiprocessing.get_context("spawn")
        workers = [context.Process(target=increment, args=(server.port, mode, INCREMENTS)) for mode in modes]
        for w in workers:
            w.start()
        try:
            for w in workers:
                w.join(timeout=90)
                assert w.exitcode == 0
        finally:
            for w in workers:
                if w.is_alive():
                    w.kill()
        assert int(r.get("stress:counter") or 0) == PROCESSES * INCREMENTS
        assert r.exists("stress:lock") == 0
