"""The asyncio client: the same API as ``redislock`` with ``await`` and ``async with``.

The default owner id is per asyncio task (``<client id>:<n>``, ``n`` unique to the task), and
the watchdog is an asyncio task of the loop that first needed it.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import math
import random
import time
import uuid
import weakref
from collections.abc import Generator, Sequence
from typing import Any, Callable

import redis
import redis.asyncio
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .._core import (
    LUA,
    MODULE,
    Acquired,
    AcquirePlan,
    Command,
    Listen,
    Registry,
    Request,
    Run,
    Target,
    acquire_flow,
    attempt_wait,
    check_mode,
    check_name,
    check_owner,
    check_replicas,
    check_timeout,
    is_noscript,
    is_redirect,
    lease_ms,
    load_script_commands,
    module_loaded,
    parse_release,
    quorum,
    raise_error,
    redlock_validity,
    renew_commands,
    renew_results,
    uses_scripts,
)
from .._errors import LockError, NotOwnedError, ReplicaSyncError
from ..client import MAX_REDIRECTS, SUBSCRIBE_TIMEOUT, _is_cluster, _one_slot, _slot
from ..client import _execute as _execute_blocking

log = logging.getLogger("redislock")

OnLost = Callable[..., Any]
NO_LIMIT = 365 * 86400.0  # a read timeout that never ends (redis-py < 8 has no "infinite")
_SYNC_KEYS = ("host", "port", "db", "username", "password", "path", "socket_timeout", "socket_connect_timeout")

_task_numbers: weakref.WeakKeyDictionary[asyncio.Task[Any], int] = weakref.WeakKeyDictionary()
_numbers = itertools.count(1)


def _task_number() -> int:
    task = asyncio.current_task()
    if task is None:
        raise RuntimeError("redislock.asyncio needs to run inside an asyncio task")
    number = _task_numbers.get(task)
    if number is None:
        number = _task_numbers[task] = next(_numbers)
    return number


async def _get_connection(pool: Any) -> Any:
    try:
        return await pool.get_connection()
    except TypeError:  # redis-py < 5.3 wants a command name
        return await pool.get_connection("_")


async def _execute(client: Any, commands: list[Command], extra: float) -> list[Any]:
    """As the blocking ``_execute``: pipelined, error replies in place, a longer read timeout."""
    pool = client.connection_pool
    conn = await _get_connection(pool)
    try:
        await conn.send_packed_command(conn.pack_commands(commands))
        timeout: float | None = None
        if extra:
            base = conn.socket_timeout
            timeout = NO_LIMIT if base is None or math.isinf(extra) else base + extra
        replies: list[Any] = []
        for _ in commands:
            try:
                replies.append(await conn.read_response(timeout=timeout))
            except ResponseError as error:
                replies.append(error)
        return replies
    finally:
        await pool.release(conn)


async def _close(resource: Any) -> None:
    closer = getattr(resource, "aclose", None) or resource.close
    await closer()


class _Engine:
    def __init__(self, redis_client: Any, mode: str, lease: int) -> None:
        self.redis = redis_client
        self.cluster = _is_cluster(redis_client)
        self.lease_ms = lease
        self.registry = Registry()
        self.mode_now: str | None = None if mode == "auto" else mode
        self._nodes: dict[str, Any] = {}
        self._watchdog: asyncio.Task[None] | None = None
        self._scripts_loaded: set[int] = set()
        self.closed = False

    async def node(self, key: str | None) -> Any:
        """A plain asyncio client of the node serving ``key`` (the client itself outside a cluster)."""
        if not self.cluster:
            return self.redis
        await self.redis.initialize()
        node = self.redis.get_node_from_key(key) if key is not None else self.redis.get_default_node()
        client = self._nodes.get(node.name)
        if client is None:
            pool = redis.asyncio.ConnectionPool(connection_class=node.connection_class, **node.connection_kwargs)
            client = self._nodes[node.name] = redis.asyncio.Redis(connection_pool=pool)
        return client

    async def mode(self, key: str | None = None) -> str:
        if self.mode_now is None:
            reply = (await _execute(await self.node(key), [("COMMAND", "INFO", "lock.acquire")], 0.0))[0]
            self.mode_now = MODULE if module_loaded(raise_error(reply)) else LUA
        return self.mode_now

    def mode_blocking(self) -> str:
        """Detect the mode before any use, over a short-lived blocking connection."""
        if self.mode_now is None:
            if self.cluster:
                nodes = list(self.redis.nodes_manager.startup_nodes.values())
                kwargs = {**nodes[0].connection_kwargs, "host": nodes[0].host, "port": nodes[0].port}
            else:
                kwargs = self.redis.connection_pool.connection_kwargs
            with redis.Redis(**{k: v for k, v in kwargs.items() if k in _SYNC_KEYS}) as probe:
                reply = _execute_blocking(probe, [("COMMAND", "INFO", "lock.acquire")], 0.0)[0]
            self.mode_now = MODULE if module_loaded(raise_error(reply)) else LUA
        return self.mode_now

    async def target(self, key: str) -> Target:
        return Target(await self.mode(key), key, self.cluster)

    async def run(self, key: str, commands: list[Command], extra: float = 0.0) -> list[Any]:
        for attempt in range(MAX_REDIRECTS):
            replies = await self.run_on(await self.node(key), commands, extra)
            if not (self.cluster and any(is_redirect(r) for r in replies)) or attempt == MAX_REDIRECTS - 1:
                return replies
            await self.redis.nodes_manager.initialize()
            await asyncio.sleep(0.01 * attempt)
        raise AssertionError("unreachable")

    async def run_on(self, client: Any, commands: list[Command], extra: float = 0.0) -> list[Any]:
        if id(client) not in self._scripts_loaded and uses_scripts(commands):
            await _execute(client, load_script_commands(), 0.0)
            self._scripts_loaded.add(id(client))
        replies = await _execute(client, commands, extra)
        if any(is_noscript(r) for r in replies):
            await _execute(client, load_script_commands(), 0.0)
            replies = await _execute(client, commands, extra)
        return replies

    async def call(self, key: str, *command: Any) -> Any:
        return raise_error((await self.run(key, [command]))[0])

    async def drive(self, flow: Generator[Request, Any, Acquired]) -> Acquired:
        pubsub: Any = None
        try:
            reply: Any = None
            while True:
                try:
                    request = flow.send(reply)
                except StopIteration as done:
                    result: Acquired = done.value
                    return result
                if isinstance(request, Run):
                    reply = await self.run(request.key, request.commands, request.extra)
                elif isinstance(request, Listen):
                    pubsub = await self._subscribe(request)
                    reply = None
                else:
                    reply = await self._next_message(pubsub, request.seconds)
        finally:
            flow.close()
            if pubsub is not None:
                await _close(pubsub)

    async def _subscribe(self, request: Listen) -> Any:
        pubsub = (await self.node(request.key)).pubsub()
        try:
            if self.cluster and hasattr(pubsub, "ssubscribe"):
                await pubsub.ssubscribe(request.channel)
            elif self.cluster:  # redis-py without sharded pub/sub in this client
                await pubsub.execute_command("SSUBSCRIBE", request.channel)
            else:
                await pubsub.subscribe(request.channel)
            deadline = time.monotonic() + SUBSCRIBE_TIMEOUT
            while (left := deadline - time.monotonic()) > 0:
                message = await pubsub.get_message(timeout=left)
                if message is not None and message["type"] in ("subscribe", "ssubscribe"):
                    return pubsub
            raise RedisTimeoutError(f"no confirmation of the subscription to {request.channel}")
        except BaseException:
            await _close(pubsub)
            raise

    @staticmethod
    async def _next_message(pubsub: Any, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            message = await pubsub.get_message(timeout=left)
            if message is not None and message["type"] in ("message", "smessage"):
                return True
        return False

    def ensure_watchdog(self) -> None:
        if (self._watchdog is None or self._watchdog.done()) and not self.closed:
            self._watchdog = asyncio.get_running_loop().create_task(self._watch(), name="redislock-watchdog")

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            try:
                await self.renew()
            except Exception:  # retried on the next tick
                log.warning("lock renewal failed; retrying next tick", exc_info=True)

    async def renew(self) -> None:
        holds = self.registry.watched()
        if not holds:
            return
        by_node: dict[int, tuple[Any, list[Any]]] = {}
        for hold in holds:
            client = await self.node(hold.key)
            by_node.setdefault(id(client), (client, []))[1].append(hold)
        for client, group in by_node.values():
            batch = renew_commands(
                await self.mode(group[0].key), group, self.lease_ms, _slot if self.cluster else _one_slot
            )
            try:
                replies = await self.run_on(client, [command for command, _ in batch])
            except Exception:
                log.warning("lock renewal failed; retrying next tick", exc_info=True)
                continue
            if self.cluster and any(is_redirect(r) for r in replies):
                await self.redis.nodes_manager.initialize()
            for reply, (_, members) in zip(replies, batch):
                for hold, renewed in renew_results(reply, members):
                    if renewed is False and self.registry.lose(hold):
                        try:
                            outcome = hold.notify_lost()
                            if inspect.isawaitable(outcome):
                                await outcome
                        except Exception:
                            log.exception("on_lost callback failed")

    def stop_soon(self) -> None:
        """Cancel the watchdog task from anywhere (garbage collection of the client)."""
        self.closed = True
        task, self._watchdog = self._watchdog, None
        if task is not None and not task.done():
            loop = task.get_loop()
            if not loop.is_closed():
                loop.call_soon_threadsafe(task.cancel)

    async def close(self) -> None:
        self.closed = True
        task, self._watchdog = self._watchdog, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                if not task.cancelled():
                    raise
        nodes, self._nodes = list(self._nodes.values()), {}
        for client in nodes:
            await _close(client)
            await client.connection_pool.disconnect()  # our own pool: aclose() leaves it open


class LockClient:
    """The asyncio ``LockClient`` over ``redis.asyncio.Redis`` or ``redis.asyncio.cluster.RedisCluster``."""

    def __init__(self, redis: Any, lease: float = 30.0, mode: str = "auto") -> None:
        self._engine = _Engine(redis, check_mode(mode), lease_ms(lease))
        self.redis = redis
        self.lease = float(lease)
        self.id = str(uuid.uuid4())
        self._finalizer = weakref.finalize(self, self._engine.stop_soon)

    @property
    def mode(self) -> str:
        """``"module"`` or ``"lua"`` (detected once; before any await, over a short blocking call)."""
        return self._engine.mode_blocking()

    async def detect_mode(self) -> str:
        """The mode, detected without blocking the event loop."""
        return await self._engine.mode()

    detect = detect_mode

    def lock(
        self,
        name: str,
        owner: str | None = None,
        fenced: bool = False,
        sync_replicas: int = 0,
        sync_timeout: float = 1.0,
        on_lost: OnLost | None = None,
    ) -> Lock:
        return Lock(self, name, owner, fenced, sync_replicas, sync_timeout, on_lost)

    async def close(self) -> None:
        """Stop the watchdog task and close this client's own per-node connections."""
        self._finalizer.detach()
        await self._engine.close()

    aclose = close

    async def __aenter__(self) -> LockClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<redislock.asyncio.LockClient id={self.id} lease={self.lease}>"


class Lock:
    """The asyncio ``Lock``; the default owner is ``<client id>:<task number>``."""

    def __init__(
        self,
        client: LockClient,
        name: str,
        owner: str | None = None,
        fenced: bool = False,
        sync_replicas: int = 0,
        sync_timeout: float = 1.0,
        on_lost: OnLost | None = None,
    ) -> None:
        self.name = check_name(name)
        self._pinned = check_owner(owner)
        self._replicas, self._sync_ms = check_replicas(sync_replicas, sync_timeout)
        self.client = client
        self.fenced = bool(fenced)
        self.on_lost = on_lost

    @property
    def owner(self) -> str:
        return self._pinned or f"{self.client.id}:{_task_number()}"

    @property
    def _engine(self) -> _Engine:
        return self.client._engine

    async def acquire(self, blocking: bool = True, timeout: float | None = None, lease: float | None = None) -> bool:
        check_timeout(timeout, blocking)
        return await self._acquire_as(self.owner, blocking, timeout, lease)

    async def _acquire_as(self, owner: str, blocking: bool, timeout: float | None, lease: float | None) -> bool:
        wait = check_timeout(timeout)
        engine = self._engine
        hold_ms = engine.lease_ms if lease is None else lease_ms(lease)
        if engine.closed:
            raise RuntimeError("the LockClient is closed")
        target = await engine.target(self.name)
        plan = AcquirePlan(target, owner, hold_ms, self.fenced, self._replicas, self._sync_ms, bool(blocking), wait)
        got = await engine.drive(acquire_flow(plan))
        if got.acquired and engine.registry.acquired(self.name, owner, lease is None, got.token, self.on_lost, self):
            engine.ensure_watchdog()
        return got.acquired

    async def release(self) -> None:
        await self._release_as(self.owner)

    async def _release_as(self, owner: str) -> None:
        engine = self._engine
        hold = engine.registry.begin_release(self.name, owner)
        rearm = engine.lease_ms if hold is not None and hold.watch else 0
        still_held = hold is not None and not hold.closing
        try:
            command = (await engine.target(self.name)).release(owner, rearm)
            still_held = not parse_release((await engine.run(self.name, [command]))[0])
        except NotOwnedError:
            still_held = False
            raise
        finally:
            engine.registry.end_release(hold, still_held)

    async def locked(self) -> bool:
        return bool(await self._engine.call(self.name, "EXISTS", self.name))

    async def owned(self) -> bool:
        return bool(await self._engine.call(self.name, "HEXISTS", self.name, self.owner))

    async def hold_count(self) -> int:
        count = await self._engine.call(self.name, "HGET", self.name, self.owner)
        return 0 if count is None else int(count)

    async def ttl(self) -> float | None:
        pttl = int(await self._engine.call(self.name, "PTTL", self.name))
        if pttl == -2:
            return None
        return math.inf if pttl < 0 else pttl / 1000

    async def force_release(self) -> bool:
        engine = self._engine
        engine.registry.drop_key(self.name)
        command = (await engine.target(self.name)).force_release()
        return bool(int(await engine.call(self.name, *command)))

    @property
    def token(self) -> int | None:
        hold = self._engine.registry.get(self.name, self.owner)
        return hold.token if hold is not None and not hold.lost else None

    async def __aenter__(self) -> Lock:
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()

    def __repr__(self) -> str:
        return f"<redislock.asyncio.Lock name={self.name!r}>"


class MultiLock:
    """The asyncio MultiLock: components tried concurrently with ``asyncio.gather``."""

    _majority = False

    def __init__(self, locks: Sequence[Lock]) -> None:
        if not locks:
            raise ValueError("a MultiLock needs at least one lock")
        self.locks = list(locks)
        self.validity: float | None = None
        self._held: dict[tuple[str, ...], list[list[int]]] = {}

    def _owners(self) -> tuple[str, ...]:
        return tuple(lock.owner for lock in self.locks)

    async def acquire(self, blocking: bool = True, timeout: float | None = None, lease: float | None = None) -> bool:
        wait = check_timeout(timeout, blocking)
        lease_s = self.locks[0].client.lease if lease is None else lease_ms(lease) / 1000
        owners = self._owners()
        count = len(self.locks)
        deadline = None if wait is None else time.monotonic() + wait
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            each = attempt_wait(remaining, count, self._majority) if blocking else 0.0
            started = time.monotonic()
            outcomes = await asyncio.gather(
                *(lock._acquire_as(owner, each > 0, each, lease) for lock, owner in zip(self.locks, owners)),
                return_exceptions=True,
            )
            taken = [i for i, ok in enumerate(outcomes) if ok is True]
            validity = redlock_validity(lease_s, time.monotonic() - started)
            if len(taken) >= quorum(count, self._majority) and (not self._majority or validity > 0):
                self._held.setdefault(owners, []).append(taken)
                self.validity = validity if self._majority else None
                return True
            unsure = [i for i, ok in enumerate(outcomes) if isinstance(ok, RedisTimeoutError)]
            await asyncio.gather(*(_release_quietly(self.locks[i], owners[i]) for i in taken + unsure))
            left = None if deadline is None else deadline - time.monotonic()
            if not blocking or (left is not None and left <= 0):
                return False
            pause = random.uniform(0.005, 0.05)
            await asyncio.sleep(pause if left is None else min(pause, left))

    async def release(self) -> None:
        owners = self._owners()
        stack = self._held.get(owners)
        if not stack:
            raise NotOwnedError("this MultiLock is not held by this owner")
        taken = stack.pop()
        if not stack:
            del self._held[owners]
        errors: list[BaseException] = []
        for i in taken:
            try:
                await self.locks[i]._release_as(owners[i])
            except Exception as error:
                log.warning("releasing component %d of %r failed: %r", i, self, error)
                errors.append(error)
        if errors:
            raise errors[0]

    async def __aenter__(self) -> MultiLock:
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()

    def __repr__(self) -> str:
        return f"<redislock.asyncio.{type(self).__name__} of {len(self.locks)} locks>"


class RedLock(MultiLock):
    """The asyncio RedLock: a majority of the components and a positive validity."""

    _majority = True


async def _release_quietly(lock: Lock, owner: str) -> None:
    try:
        await lock._release_as(owner)
    except Exception as error:
        log.info("giving back %r failed: %r", lock, error)


__all__ = ["Lock", "LockClient", "LockError", "MultiLock", "NotOwnedError", "RedLock", "ReplicaSyncError"]
