"""The asyncio client: the same API as ``redislock`` with ``await`` (``async with lock:``).

The default owner id is per asyncio task (``"<client id>:<n>"``, ``n`` unique to the task), so
two tasks on one thread are two owners. The watchdog is an asyncio task.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import time
import uuid
import weakref
from collections.abc import Awaitable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Callable, Optional, Union

import redis.asyncio
import redis.exceptions

from .. import _core
from .._core import Attempt
from .._errors import LockError, NotOwnedError, ReplicaSyncError

try:
    from redis.asyncio.cluster import RedisCluster
except ImportError:  # pragma: no cover
    RedisCluster = None  # type: ignore[assignment,misc]

__all__ = ["Lock", "LockClient", "LockError", "MultiLock", "NotOwnedError", "RedLock", "ReplicaSyncError"]

log = logging.getLogger("redislock")

LostCallback = Callable[["Lock"], Any]

_task_numbers: weakref.WeakKeyDictionary[asyncio.Task[Any], int] = weakref.WeakKeyDictionary()
_counter = itertools.count(1)


def _task_number() -> int:
    task = asyncio.current_task()
    if task is None:
        return 0
    n = _task_numbers.get(task)
    if n is None:
        n = _task_numbers[task] = next(_counter)
    return n


class LockClient:
    """Asyncio twin of :class:`redislock.LockClient` on a ``redis.asyncio`` client."""

    def __init__(self, redis_client: Any, lease: float = 30.0, mode: str = "auto") -> None:
        self._lease_ms = _core.lease_ms(lease)
        self.lease = self._lease_ms / 1000.0
        self._requested = _core.check_mode(mode)
        self._mode: Optional[str] = None if self._requested == "auto" else self._requested
        self.redis = redis_client
        self.id = str(uuid.uuid4())
        self._cluster = RedisCluster is not None and isinstance(redis_client, RedisCluster)
        self._scripts: dict[str, Any] = {}
        self._watchdog = _Watchdog(self)

    @property
    def mode(self) -> str:
        """``"module"`` or ``"lua"``. Detected by the first lock call or ``await locks.detect()``;
        read before that, it asks the server once over a short-lived synchronous connection."""
        if self._mode is None:
            self._mode = _detect_blocking(self.redis, self._cluster)
        return self._mode or "auto"

    async def detect(self) -> str:
        if self._mode is None:
            # Read raw: redis-py's COMMAND reply parser cannot take the [nil] of an unknown command.
            info = (await self._raw("lock.acquire", [["COMMAND", "INFO", "lock.acquire"]], None))[0]
            self._mode = "module" if _core.module_loaded(info) else "lua"
        return self._mode

    def lock(
        self,
        name: str,
        owner: Optional[str] = None,
        fenced: bool = False,
        sync_replicas: int = 0,
        sync_timeout: float = 1.0,
        on_lost: Optional[LostCallback] = None,
    ) -> Lock:
        return Lock(self, name, owner, fenced, sync_replicas, sync_timeout, on_lost)

    async def close(self) -> None:
        await self._watchdog.stop()

    async def __aenter__(self) -> LockClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _script(self, kind: str) -> Any:
        s = self._scripts.get(kind)
        if s is None:
            s = self._scripts[kind] = self.redis.register_script(_SCRIPTS[kind])
        return s

    @property
    def _publish(self) -> str:
        return "SPUBLISH" if self._cluster else "PUBLISH"

    async def _raw(
        self, name: str, commands: list[list[Union[str, int]]], wait_ms: Optional[int]
    ) -> list[Any]:
        """Send ``commands`` pipelined on one connection to ``name``'s node, read every reply;
        the first may block server-side for ``wait_ms`` (0: no limit)."""
        read_timeout = 365 * 86400.0 if wait_ms == 0 else (wait_ms or 0) / 1000.0 + 30.0
        if self._cluster:
            await self.redis.initialize()  # a no-op once the slots are known
            node = self.redis.get_node_from_key(name)
            conn = node.acquire_connection()
            release: Callable[[], Any] = lambda: node.release(conn)  # noqa: E731
        else:
            pool = self.redis.connection_pool
            try:
                conn = await pool.get_connection()
            except TypeError:  # redis-py < 5.3 wants a command name
                conn = await pool.get_connection("LOCK.ACQUIRE")
            release = lambda: pool.release(conn)  # noqa: E731
        ok = False
        try:
            await conn.send_packed_command(conn.pack_commands(commands))
            replies: list[Any] = []
            error: Optional[Exception] = None
            for _ in commands:
                try:
                    replies.append(await conn.read_response(timeout=read_timeout))
                except redis.exceptions.ResponseError as e:
                    error = error or e
                    replies.append(None)
            ok = True
            if error is not None:
                raise error
            return replies
        finally:
            if not ok:
                await conn.disconnect()
            r = release()
            if isinstance(r, Awaitable):
                await r


def _detect_blocking(client: Any, cluster: bool) -> Optional[str]:
    """``COMMAND INFO lock.acquire`` over a synchronous connection made from the asyncio
    client's settings (for a property that cannot await). None when that is not possible."""
    import redis as sync_redis

    try:
        if cluster:
            node = client.get_nodes()[0]
            kwargs = {"host": node.host, "port": node.port}
            kwargs.update({k: v for k, v in client.get_connection_kwargs().items() if k in _SYNC_KWARGS})
        else:
            kwargs = {k: v for k, v in client.connection_pool.connection_kwargs.items() if k in _SYNC_KWARGS}
        with sync_redis.Redis(**kwargs) as r:
            try:
                conn = r.connection_pool.get_connection()
            except TypeError:
                conn = r.connection_pool.get_connection("COMMAND")
            conn.send_command("COMMAND", "INFO", "lock.acquire")
            info = conn.read_response()
            r.connection_pool.release(conn)
        return "module" if _core.module_loaded(info) else "lua"
    except Exception:
        return None


_SYNC_KWARGS = {"host", "port", "db", "username", "password", "socket_timeout", "socket_connect_timeout"}

_SCRIPTS = {
    "acquire": _core.ACQUIRE_LUA,
    "fenced": _core.FENCED_ACQUIRE_LUA,
    "unlock": _core.UNLOCK_LUA,
    "renew": _core.RENEW_LUA,
    "force": _core.FORCE_UNLOCK_LUA,
}


@dataclass
class _Hold:
    count: int = 0
    token: Optional[int] = None
    lease_ms: int = 0
    watch: bool = False
    lost: bool = False


class Lock:
    """Asyncio twin of :class:`redislock.Lock`; the owner id is per task."""

    def __init__(
        self,
        client: LockClient,
        name: str,
        owner: Optional[str] = None,
        fenced: bool = False,
        sync_replicas: int = 0,
        sync_timeout: float = 1.0,
        on_lost: Optional[LostCallback] = None,
    ) -> None:
        self.client = client
        self.name = _core.check_name(name)
        self._owner_id = _core.check_owner(owner)
        self.fenced = bool(fenced)
        if isinstance(sync_replicas, bool) or not isinstance(sync_replicas, int) or sync_replicas < 0:
            raise ValueError("sync_replicas must be an integer >= 0")
        self.sync_replicas = sync_replicas
        sync_ms = _core.timeout_ms(sync_timeout, "sync_timeout")
        self._sync_ms = 0 if sync_ms is None else sync_ms
        self.sync_timeout = sync_timeout
        self.on_lost = on_lost
        self.channel = _core.derived(_core.CHANNEL_PREFIX, self.name)
        self.token_key = _core.derived(_core.TOKEN_PREFIX, self.name)
        self._holds: dict[str, _Hold] = {}

    def __repr__(self) -> str:
        return f"<redislock.asyncio.Lock {self.name!r} mode={self.client._mode}>"

    @property
    def owner(self) -> str:
        return self._owner_id or f"{self.client.id}:{_task_number()}"

    async def acquire(
        self, blocking: bool = True, timeout: Optional[float] = None, lease: Optional[float] = None
    ) -> bool:
        """Take the lock (again, if this task holds it); see :meth:`redislock.Lock.acquire`."""
        return await self._acquire_as(self.owner, blocking, timeout, lease)

    async def _acquire_as(
        self, owner: str, blocking: bool, timeout: Optional[float], lease: Optional[float]
    ) -> bool:
        if not blocking and timeout is not None:
            raise ValueError("a non-blocking acquire takes no timeout")
        wait = _core.timeout_ms(timeout)
        lease_ms = self.client._lease_ms if lease is None else _core.lease_ms(lease)
        if await self.client.detect() == "module":
            attempt = await self._acquire_module(owner, lease_ms, blocking, wait)
        else:
            attempt = await self._acquire_lua(owner, lease_ms, blocking, wait)
        if not attempt.acquired:
            return False
        hold = self._holds.get(owner)
        if hold is None or hold.lost:
            hold = self._holds[owner] = _Hold()
        hold.count += 1
        hold.token = attempt.token
        hold.lease_ms = lease_ms
        hold.watch = hold.watch or lease is None
        if hold.watch:
            self.client._watchdog.add(self, owner)
        return True

    def _wait_cmd(self) -> list[list[Union[str, int]]]:
        return [["WAIT", self.sync_replicas, self._sync_ms]] if self.sync_replicas else []

    async def _check_replicas(self, attempt: Attempt, wait_reply: list[Any], owner: str) -> Attempt:
        if not attempt.acquired or not self.sync_replicas:
            return attempt
        acked = _core.as_int(wait_reply[0]) if wait_reply else 0
        if acked < self.sync_replicas:
            with contextlib.suppress(redis.exceptions.RedisError):
                await self._release_once(owner, lease_ms=None)
            raise ReplicaSyncError(acked, self.sync_replicas)
        return attempt

    async def _acquire_module(
        self, owner: str, lease_ms: int, blocking: bool, wait: Optional[int]
    ) -> Attempt:
        wait_arg: Optional[int] = None
        if blocking and wait != 0:
            wait_arg = 0 if wait is None else wait
        cmd = _core.acquire_command(self.name, owner, lease_ms, wait_arg, self.fenced)
        if wait_arg is None and not self.sync_replicas:
            return _core.parse_acquire(await self.client.redis.execute_command(*cmd))
        replies = await self.client._raw(self.name, [cmd, *self._wait_cmd()], wait_arg)
        return await self._check_replicas(_core.parse_acquire(replies[0]), replies[1:], owner)

    async def _try_lua(self, owner: str, lease_ms: int) -> Attempt:
        kind = "fenced" if self.fenced else "acquire"
        keys = [self.name, self.token_key] if self.fenced else [self.name]
        if not self.sync_replicas:
            reply = await self.client._script(kind)(keys=keys, args=[lease_ms, owner])
            return _core.parse_acquire(reply)
        # The script (by text, so no NOSCRIPT round) and WAIT on one connection.
        cmd: list[Union[str, int]] = ["EVAL", _SCRIPTS[kind], len(keys), *keys, lease_ms, owner]
        replies = await self.client._raw(self.name, [cmd, *self._wait_cmd()], None)
        return await self._check_replicas(_core.parse_acquire(replies[0]), replies[1:], owner)

    async def _acquire_lua(self, owner: str, lease_ms: int, blocking: bool, wait: Optional[int]) -> Attempt:
        attempt = await self._try_lua(owner, lease_ms)
        if attempt.acquired or not blocking or wait == 0:
            return attempt
        deadline = None if wait is None else time.monotonic() + wait / 1000.0
        pubsub = (
            self.client.redis.pubsub(ignore_subscribe_messages=True) if not self.client._cluster else None
        )
        try:
            if pubsub is not None:
                await pubsub.subscribe(self.channel)
            while True:
                attempt = await self._try_lua(owner, lease_ms)
                if attempt.acquired:
                    return attempt
                left = math.inf if deadline is None else deadline - time.monotonic()
                if left <= 0:
                    return attempt
                pause = attempt.pttl / 1000.0 if attempt.pttl >= 0 else 1.0
                await _wait_message(pubsub, min(left, max(pause, 0.001)))
        finally:
            if pubsub is not None:
                with contextlib.suppress(Exception):
                    await pubsub.aclose() if hasattr(pubsub, "aclose") else await pubsub.close()

    async def release(self) -> None:
        """Give up one hold; see :meth:`redislock.Lock.release`."""
        await self._release_as(self.owner)

    async def _release_as(self, owner: str) -> None:
        hold = self._holds.get(owner)
        if hold is not None and hold.lost:
            del self._holds[owner]
            raise NotOwnedError(f"lock {self.name!r} was lost before release")
        lease = hold.lease_ms if hold is not None else self.client._lease_ms
        await self._release_once(owner, lease_ms=lease)

    async def _release_once(self, owner: str, lease_ms: Optional[int]) -> None:
        if await self.client.detect() == "module":
            r = await self.client.redis.execute_command("LOCK.RELEASE", self.name, owner)
        else:
            args = [_core.RELEASE_MESSAGE, lease_ms or self.client._lease_ms, owner, self.client._publish]
            r = await self.client._script("unlock")(keys=[self.name, self.channel], args=args)
        hold = self._holds.get(owner)
        if r is None or _core.as_int(r) == 1:
            self._holds.pop(owner, None)
            self.client._watchdog.remove(self, owner)
        elif hold is not None:
            hold.count = max(1, hold.count - 1)
        if r is None:
            raise NotOwnedError(f"lock {self.name!r} is not held by {owner}")

    async def locked(self) -> bool:
        return bool(await self.client.redis.exists(self.name))

    async def owned(self) -> bool:
        owner = self.owner
        hold = self._holds.get(owner)
        if hold is not None and hold.lost:
            return False
        return bool(await self.client.redis.hexists(self.name, owner))

    async def hold_count(self) -> int:
        return _core.as_int(await self.client.redis.hget(self.name, self.owner))

    async def ttl(self) -> Optional[float]:
        p = _core.as_int(await self.client.redis.pttl(self.name), -2)
        if p == -2:
            return None
        return math.inf if p == -1 else p / 1000.0

    async def force_release(self) -> bool:
        if await self.client.detect() == "module":
            r = await self.client.redis.execute_command("LOCK.FORCERELEASE", self.name)
        else:
            args = [_core.RELEASE_MESSAGE, self.client._publish]
            r = await self.client._script("force")(keys=[self.name, self.channel], args=args)
        return _core.as_int(r) == 1

    @property
    def token(self) -> Optional[int]:
        hold = self._holds.get(self.owner)
        return None if hold is None or hold.lost else hold.token

    async def __aenter__(self) -> Lock:
        if not await self.acquire():
            raise LockError(f"could not acquire {self.name!r}")
        return self

    async def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.release()

    def _watched(self, owner: str) -> Optional[_Hold]:
        hold = self._holds.get(owner)
        return hold if hold is not None and hold.watch and not hold.lost else None

    async def _mark_lost(self, owner: str, seen: _Hold) -> None:
        """The renewal of hold ``seen`` found it gone (unless it was released meanwhile)."""
        hold = self._holds.get(owner)
        if hold is not seen or hold.lost:
            return
        hold.lost = True
        if self.on_lost is not None:
            try:
                r = self.on_lost(self)
                if asyncio.iscoroutine(r):
                    await r
            except Exception:
                log.exception("on_lost callback of %r failed", self.name)


async def _wait_message(pubsub: Any, seconds: float) -> None:
    """Wait up to ``seconds`` for a release message (just sleep without a subscription)."""
    if pubsub is None:
        await asyncio.sleep(min(seconds, 0.05))
        return
    end = time.monotonic() + seconds
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return
        msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=min(left, 1.0))
        if msg is not None and msg.get("type") == "message":
            return


class _Watchdog:
    """An asyncio task per LockClient renewing watchdog-kept holds every ``lease / 3``."""

    def __init__(self, client: LockClient) -> None:
        self._client = weakref.ref(client)
        self._period = client._lease_ms / 3000.0
        self._entries: dict[tuple[int, str], Lock] = {}
        self._task: Optional[asyncio.Task[None]] = None
        self._stopped = False

    def add(self, lock: Lock, owner: str) -> None:
        if self._stopped:
            return
        self._entries[(id(lock), owner)] = lock
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(_Watchdog._run(weakref.ref(self)))

    def remove(self, lock: Lock, owner: str) -> None:
        self._entries.pop((id(lock), owner), None)

    async def stop(self) -> None:
        self._stopped = True
        self._entries.clear()
        t, self._task = self._task, None
        if t is not None and t is not asyncio.current_task():
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

    @staticmethod
    async def _run(ref: weakref.ref[_Watchdog]) -> None:
        while True:
            wd = ref()
            if wd is None or wd._stopped:
                return
            period = wd._period
            del wd
            await asyncio.sleep(period)
            wd = ref()
            if wd is None or wd._stopped:
                return
            client = wd._client()
            entries = list(wd._entries.items())
            del wd
            if client is None:
                return
            try:
                await _renew(client, [(lock, owner) for (_, owner), lock in entries])
            except redis.exceptions.ConnectionError:
                log.warning("lock renewal failed (connection); retrying next tick")
            except Exception:
                log.exception("lock renewal failed; retrying next tick")
            del client


async def _renew(client: LockClient, entries: list[tuple[Lock, str]]) -> None:
    todo = [(lock, owner, hold) for lock, owner in entries if (hold := lock._watched(owner)) is not None]
    if not todo:
        return
    results: list[Any]
    if await client.detect() == "module" and not client._cluster:
        pipe = client.redis.pipeline(transaction=False)
        for lock, owner, hold in todo:
            pipe.execute_command("LOCK.RENEW", lock.name, owner, hold.lease_ms)
        results = await pipe.execute(raise_on_error=False)
    elif client.mode == "module":
        results = await asyncio.gather(
            *(
                client.redis.execute_command("LOCK.RENEW", lock.name, owner, hold.lease_ms)
                for lock, owner, hold in todo
            ),
            return_exceptions=True,
        )
    else:
        script = client._script("renew")
        results = await asyncio.gather(
            *(script(keys=[lock.name], args=[hold.lease_ms, owner]) for lock, owner, hold in todo),
            return_exceptions=True,
        )
    for (lock, owner, hold), r in zip(todo, results):
        if isinstance(r, BaseException):
            log.warning("renewal of %r failed: %s", lock.name, r)
        elif _core.as_int(r) == 0 and lock._watched(owner) is hold:
            client._watchdog.remove(lock, owner)
            await lock._mark_lost(owner, hold)


from .multi import MultiLock, RedLock  # noqa: E402
