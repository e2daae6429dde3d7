"""Asyncio twins of :class:`redislock.MultiLock` and :class:`redislock.RedLock`."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Optional

from .. import _core
from .._errors import LockError

if TYPE_CHECKING:
    from . import Lock

ROUND_WAIT = 0.1


class MultiLock:
    """Holds every component lock, or none of them; components are tried concurrently."""

    def __init__(self, locks: Sequence[Lock]) -> None:
        from . import Lock as AsyncLock

        if not locks or not all(isinstance(lk, AsyncLock) for lk in locks):
            raise ValueError("a multi-server lock needs a non-empty list of redislock.asyncio.Lock")
        self.locks = list(locks)
        self._held: dict[int, list[tuple[Lock, str]]] = {}

    def _quorum(self) -> int:
        return len(self.locks)

    def _valid(self, elapsed: float, lease: float) -> bool:
        return True

    async def acquire(
        self, blocking: bool = True, timeout: Optional[float] = None, lease: Optional[float] = None
    ) -> bool:
        if not blocking and timeout is not None:
            raise ValueError("a non-blocking acquire takes no timeout")
        wait = _core.timeout_ms(timeout)
        if lease is not None:
            _core.lease_ms(lease)
        lease_s = lease if lease is not None else self.locks[0].client.lease
        owners = [lk.owner for lk in self.locks]
        deadline = None if wait is None else time.monotonic() + wait / 1000.0
        first = True
        key = id(asyncio.current_task())
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            per_lock: Optional[float] = (
                None if first or not blocking else min(ROUND_WAIT, max(left or ROUND_WAIT, 0.0))
            )
            start = time.monotonic()

            async def attempt(i: int, per_lock: Optional[float] = per_lock) -> bool:
                try:
                    lk = self.locks[i]
                    if per_lock is None:
                        return await lk._acquire_as(owners[i], False, None, lease)
                    return await lk._acquire_as(owners[i], True, per_lock, lease)
                except Exception:
                    return False

            oks = await asyncio.gather(*(attempt(i) for i in range(len(self.locks))))
            got = [i for i, ok in enumerate(oks) if ok]
            if len(got) >= self._quorum() and self._valid(time.monotonic() - start, lease_s):
                self._held[key] = [(self.locks[i], owners[i]) for i in got]
                return True
            for i in got:
                with contextlib.suppress(Exception):  # best effort: the lease ends it anyway
                    await self.locks[i]._release_as(owners[i])
            first = False
            if not blocking or (deadline is not None and time.monotonic() >= deadline):
                return False
            await asyncio.sleep(random.uniform(0.001, 0.02))

    async def release(self) -> None:
        held = self._held.pop(id(asyncio.current_task()), None)
        if held is None:
            held = [(lk, lk.owner) for lk in self.locks]
        errors: list[Exception] = []
        for lk, owner in held:
            try:
                await lk._release_as(owner)
            except Exception as e:
                errors.append(e)
        if errors:
            raise errors[0]

    async def __aenter__(self) -> MultiLock:
        if not await self.acquire():
            raise LockError("could not acquire the multi-server lock")
        return self

    async def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.release()


class RedLock(MultiLock):
    """Holds a majority of the component locks within Redlock's validity time."""

    def _quorum(self) -> int:
        return len(self.locks) // 2 + 1

    def _valid(self, elapsed: float, lease: float) -> bool:
        drift = lease * 0.01 + 0.002
        return lease - elapsed - drift > 0
