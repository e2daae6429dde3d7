"""Locks over several independent servers: ``MultiLock`` (every component) and ``RedLock``
(a majority, within the Redlock validity time). Components are tried in parallel."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Optional

from . import _core
from ._errors import LockError
from .client import Lock

# While retrying, each component waits this long per round (server-side with the module).
ROUND_WAIT = 0.1


class MultiLock:
    """Holds every component lock, or none of them (Redisson's RedissonMultiLock)."""

    def __init__(self, locks: Sequence[Lock]) -> None:
        if not locks or not all(isinstance(lk, Lock) for lk in locks):
            raise ValueError("a multi-server lock needs a non-empty list of redislock.Lock")
        self.locks = list(locks)
        self._held: dict[int, list[tuple[Lock, str]]] = {}
        self._mutex = threading.Lock()

    def _quorum(self) -> int:
        return len(self.locks)

    def _valid(self, elapsed: float, lease: float) -> bool:
        return True

    def acquire(
        self, blocking: bool = True, timeout: Optional[float] = None, lease: Optional[float] = None
    ) -> bool:
        """Try every component in parallel until enough are held; on a failed round release
        the components it took, then retry (``blocking``) until ``timeout`` or give up."""
        if not blocking and timeout is not None:
            raise ValueError("a non-blocking acquire takes no timeout")
        wait = _core.timeout_ms(timeout)
        if lease is not None:
            _core.lease_ms(lease)
        lease_s = lease if lease is not None else self.locks[0].client.lease
        owners = [lk.owner for lk in self.locks]
        deadline = None if wait is None else time.monotonic() + wait / 1000.0
        first = True
        with ThreadPoolExecutor(max_workers=len(self.locks)) as pool:
            while True:
                left = None if deadline is None else deadline - time.monotonic()
                per_lock: Optional[float] = (
                    None if first or not blocking else min(ROUND_WAIT, max(left or ROUND_WAIT, 0.0))
                )
                start = time.monotonic()

                def attempt(i: int, per_lock: Optional[float] = per_lock) -> bool:
                    try:
                        lk = self.locks[i]
                        if per_lock is None:
                            return lk._acquire_as(owners[i], False, None, lease)
                        return lk._acquire_as(owners[i], True, per_lock, lease)
                    except Exception:
                        return False  # a server down counts as not acquired

                got = [
                    i
                    for i, ok in zip(range(len(self.locks)), pool.map(attempt, range(len(self.locks))))
                    if ok
                ]
                if len(got) >= self._quorum() and self._valid(time.monotonic() - start, lease_s):
                    with self._mutex:
                        self._held[threading.get_ident()] = [(self.locks[i], owners[i]) for i in got]
                    return True
                for i in got:
                    with contextlib.suppress(Exception):  # best effort: the lease ends it anyway
                        self.locks[i]._release_as(owners[i])
                first = False
                if not blocking or (deadline is not None and time.monotonic() >= deadline):
                    return False
                time.sleep(random.uniform(0.001, 0.02))

    def release(self) -> None:
        """Release every component held, continuing past errors; raise the first error after
        the last one."""
        with self._mutex:
            held = self._held.pop(threading.get_ident(), None)
        if held is None:
            held = [(lk, lk.owner) for lk in self.locks]
        errors: list[Exception] = []
        for lk, owner in held:
            try:
                lk._release_as(owner)
            except Exception as e:
                errors.append(e)
        if errors:
            raise errors[0]

    def __enter__(self) -> MultiLock:
        if not self.acquire():
            raise LockError("could not acquire the multi-server lock")
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.release()


class RedLock(MultiLock):
    """Holds a majority (``n // 2 + 1``) of the component locks, acquired within the lease
    minus the clock drift (1% of the lease + 2 ms): Redlock's validity time."""

    def _quorum(self) -> int:
        return len(self.locks) // 2 + 1

    def _valid(self, elapsed: float, lease: float) -> bool:
        drift = lease * 0.01 + 0.002
        return lease - elapsed - drift > 0
