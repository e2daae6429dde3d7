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
import os
import random
import sys
import time
import uuid
import weakref
from collections.abc import Coroutine, Generator, Iterable
from typing import Any, Callable

import redis
import redis.asyncio
from redis.asyncio import Redis as AsyncRedis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .._compat import (
    cluster_node_params_async,
    get_connection_async,
    own_client_async,
    pool_params,
    refresh_slots,
    sentinel_twin,
    socket_timeout_of,
    startup_node_params_async,
    sync_twin,
)
from .._core import (
    COMPONENT_GRACE,
    DEFAULT,
    LUA,
    MODULE,
    PLAIN,
    READ,
    WRITE,
    WRITE_SUFFIX,
    Acquired,
    AcquirePlan,
    Alive,
    Await,
    Command,
    Hold,
    Listen,
    Registry,
    Request,
    Run,
    Suspect,
    Target,
    Ticket,
    acquire_flow,
    attempt_wait,
    check_callback,
    check_cluster_name,
    check_locks,
    check_max_hold,
    check_mode,
    check_name,
    check_owner,
    check_replicas,
    check_timeout,
    hard_deadline,
    hold_lease_ms,
    is_noscript,
    is_redirect,
    lease_ms,
    load_script_commands,
    module_loaded,
    parse_locked,
    parse_release,
    parse_renew,
    quorum,
    raise_error,
    reconcile_commands,
    redlock_validity,
    reply_grace,
    resolve,
    timed_out,
    upgrade_error,
    uses_scripts,
)
from .._errors import LockError, LockTimeout, NotOwnedError, ReplicaSyncError, UpgradeError
from .._sem import (
    SEM,
    SETTLE_AGAIN,
    SemAcquirePlan,
    SemTarget,
    check_acquire_permits,
    check_total,
    held_for,
    info_map,
    new_ids,
    parse_available,
    parse_count,
    permit_hold,
    permit_owner,
    renew_batch,
    renew_outcomes,
    still_held,
)
from .._sem import acquire_flow as sem_acquire_flow
from .._sem import check_cluster_name as check_sem_cluster_name
from .._sem import timed_out as timed_out_permits
from ..client import (
    MAX_REDIRECTS,
    SIDE_TIMEOUT,
    SUBSCRIBE_TIMEOUT,
    F,
    _bounded,
    _io_timeout,
    _is_cluster,
    _next_pause,
    _one_slot,
    _slot,
    _synchronized,
)
from ..client import _execute as _execute_blocking

log = logging.getLogger("redislock")

OnLost = Callable[..., Any]
NO_LIMIT = 365 * 86400.0  # a read timeout that never ends (redis-py < 8 has no "infinite")
# A bounded read gives the event loop at least this long to take in a reply that is already
# there (after the loop itself was blocked past the deadline).
MIN_READ = 0.01

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


def _in_task() -> bool:
    try:
        return asyncio.current_task() is not None
    except RuntimeError:  # no running event loop
        return False


def _task_alive() -> Alive | None:
    """Whether the calling task (whose default owner takes a hold) is still running."""
    try:
        task = asyncio.current_task()
    except RuntimeError:
        return None
    if task is None:
        return None
    ref = weakref.ref(task)

    def alive() -> bool:
        t = ref()
        return t is not None and not t.done()

    return alive


def _cancel_requests() -> int:
    """The calling task's pending cancellation requests (0 outside a task, or before 3.11)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return int(cancelling()) if cancelling is not None else 0


def _raise_if_cancelled(before: int) -> None:
    """Raise the cancellation a library swallowed since ``before`` was counted.

    On Python < 3.12 ``asyncio.wait_for`` returns the result instead of raising when the
    awaited step completes in the loop iteration the caller is cancelled in, and redis-py
    wraps every send on a connection with a ``socket_timeout`` in it: a cancelled ``acquire``
    would go on waiting, and could even take the lock for nobody. The request is still
    counted by the task (3.11+), so it is raised here, once the step is done."""
    if _cancel_requests() > before:
        raise asyncio.CancelledError


async def _read(conn: Any, seconds: float | None) -> Any:
    """One reply, waiting at most ``seconds`` (None: without limit, beyond the socket timeout).

    Never ``read_response(timeout=t)`` with a real limit: when ``t`` runs out, redis.asyncio
    returns None (5.0 to 8.x), the same as a nil reply, which for LOCK.ACQUIRE means "granted".
    The limit is ours instead: running out raises TimeoutError, an unknown outcome, and the
    caller disconnects the connection (and releases whatever the server may have granted)."""
    if seconds is None:
        return await conn.read_response(timeout=NO_LIMIT)
    seconds = max(seconds, MIN_READ)
    try:
        if sys.version_info >= (3, 11):
            async with asyncio.timeout(seconds):
                return await conn.read_response(timeout=NO_LIMIT)
        return await asyncio.wait_for(conn.read_response(timeout=NO_LIMIT), seconds)
    except asyncio.TimeoutError:
        raise RedisTimeoutError("no reply in time: the outcome is unknown") from None


async def _execute(
    client: Any, commands: list[Command], extra: float = 0.0, deadline: float | None = None
) -> list[Any]:
    """As the blocking ``_execute``: pipelined, error replies in place, a longer (``extra``) or
    bounded (``deadline``) wait for replies; an exception or cancellation before the last reply
    was read disconnects the connection before it goes back to the pool."""
    pool = client.connection_pool
    conn: Any = None
    in_step = False
    before = _cancel_requests()
    try:
        conn = await get_connection_async(pool)
        await conn.send_packed_command(conn.pack_commands(resolve(commands) if extra else commands))
        _raise_if_cancelled(before)
        until: float | None = None
        bounded = bool(extra) or deadline is not None
        if bounded:
            base = conn.socket_timeout
            until = None if base is None or math.isinf(extra) else time.monotonic() + base + extra
            if deadline is not None:
                until = deadline if until is None else min(until, deadline)
        replies: list[Any] = []
        for _ in commands:
            try:
                if bounded:
                    replies.append(await _read(conn, None if until is None else until - time.monotonic()))
                else:  # the socket timeout applies, and raises
                    replies.append(await conn.read_response())
            except ResponseError as error:
                replies.append(error)
            _raise_if_cancelled(before)
        in_step = True
        return replies
    finally:
        if conn is not None:
            if not in_step:
                await conn.disconnect(nowait=True)
            await pool.release(conn)


async def _close(resource: Any) -> None:
    closer = getattr(resource, "aclose", None) or resource.close
    await closer()


_engines: weakref.WeakSet[_Engine] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for engine in list(_engines):
        engine.forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _Engine:
    """As the blocking client's engine: the application's connections for acquires and
    reads, side connections of its own for releases, ``extend``, Lua-mode subscriptions and
    MultiLock components, and the watchdog's own connections."""

    def __init__(self, redis_client: Any, mode: str, lease: int, max_hold: float | None = None) -> None:
        self.redis = redis_client
        self.cluster = _is_cluster(redis_client)
        self.lease_ms = lease
        self.max_hold = max_hold
        self.io_timeout = _io_timeout(lease)
        app_timeout = socket_timeout_of(redis_client)
        self.side_timeout = app_timeout or SIDE_TIMEOUT
        self.grace = reply_grace(app_timeout)
        self.id = str(uuid.uuid4())
        self.registry = Registry()
        self.mode_now: str | None = None if mode == "auto" else mode
        self.sem_mode_now: str | None = LUA if mode == LUA else None
        self._nodes: dict[str, Any] = {}
        self._own: dict[str, Any] = {}
        self._watchdog: asyncio.Task[None] | None = None
        self._scripts_loaded: set[int] = set()
        self._background: set[asyncio.Task[Any]] = set()
        self.closed = False
        _engines.add(self)

    def forked(self) -> None:
        """In a forked child: a new client id, no holds, no watchdog, no parent connections."""
        self.id = str(uuid.uuid4())
        self.registry.reset()
        self._watchdog = None
        self._nodes = {}
        self._own = {}
        self._scripts_loaded = set()
        self._background = set()

    async def _node_params(self, key: str | None) -> tuple[str, type[Any], dict[str, Any]]:
        if not self.cluster:
            cls, kwargs = pool_params(self.redis.connection_pool)
            return "", cls, kwargs
        await self.redis.initialize()
        node = self.redis.get_node_from_key(key) if key is not None else self.redis.get_default_node()
        cls, kwargs = cluster_node_params_async(self.redis, node)
        return str(node.name), cls, kwargs

    async def node(self, key: str | None) -> Any:
        """A plain asyncio client of the node serving ``key`` (the client itself outside a cluster)."""
        if not self.cluster:
            return self.redis
        name, cls, kwargs = await self._node_params(key)
        client = self._nodes.get(name)
        if client is None:
            pool = redis.asyncio.ConnectionPool(connection_class=cls, **kwargs)
            client = self._nodes[name] = redis.asyncio.Redis(connection_pool=pool)
        return client

    async def own(self, key: str, side: bool = False) -> Any:
        """This client's own connections to the node of ``key``: the watchdog's (short
        timeouts) or, with ``side``, the side connections."""
        kind = "side" if side else "own"
        if not self.cluster:  # one server: no routing to work out
            client = self._own.get(kind)
            if client is not None:
                return client
        name, cls, kwargs = await self._node_params(key)
        name = f"{kind}:{name}" if self.cluster else kind
        client = self._own.get(name)
        if client is None:
            timeout = self.side_timeout if side else self.io_timeout
            client = self._own[name] = own_client_async(cls, kwargs, timeout)
        return client

    async def mode(self, key: str | None = None, deadline: float | None = None) -> str:
        if self.mode_now is None:
            reply = (await _execute(await self.node(key), [("COMMAND", "INFO", "lock.acquire")], 0.0, deadline))[0]
            self.mode_now = MODULE if module_loaded(raise_error(reply)) else LUA
        return self.mode_now

    def mode_blocking(self) -> str:
        """Detect the mode before any use, over a short-lived blocking connection of the same
        kind (TCP, unix socket, TLS, Sentinel-managed) as the application's."""
        if self.mode_now is None:
            timeout = max(self.io_timeout, 2.0)
            pool = None if self.cluster else self.redis.connection_pool
            with sentinel_twin(pool, timeout) as sentinel:
                if sentinel is not None:
                    probe = sentinel
                elif self.cluster:
                    probe = sync_twin(*startup_node_params_async(self.redis), timeout)
                else:
                    probe = sync_twin(*pool_params(pool), timeout)
                with probe:
                    reply = _execute_blocking(probe, [("COMMAND", "INFO", "lock.acquire")], 0.0)[0]
            self.mode_now = MODULE if module_loaded(raise_error(reply)) else LUA
        return self.mode_now

    async def target(self, key: str, deadline: float | None = None, kind: str = PLAIN) -> Target:
        return Target(await self.mode(key, deadline), key, self.cluster, kind)

    async def sem_mode(self, key: str | None = None, deadline: float | None = None) -> str:
        """The semaphores' mode (see the blocking client's ``sem_mode``)."""
        if self.sem_mode_now is None:
            if await self.mode(key, deadline) == LUA:
                self.sem_mode_now = LUA
            else:
                command = ("COMMAND", "INFO", "lock.semacquire")
                reply = (await _execute(await self.node(key), [command], 0.0, deadline))[0]
                self.sem_mode_now = MODULE if module_loaded(raise_error(reply)) else LUA
        return self.sem_mode_now

    async def sem_target(self, key: str, deadline: float | None = None) -> SemTarget:
        target = SemTarget(await self.sem_mode(key, deadline), key, self.cluster)
        if self.cluster and target.mode == LUA:
            check_sem_cluster_name(key)
        return target

    async def run(
        self, key: str, commands: list[Command], extra: float = 0.0, deadline: float | None = None, side: bool = False
    ) -> list[Any]:
        for attempt in range(MAX_REDIRECTS):
            client = await self.own(key, side=True) if side else await self.node(key)
            replies = await self.run_on(client, commands, extra, deadline)
            if not (self.cluster and any(is_redirect(r) for r in replies)) or attempt == MAX_REDIRECTS - 1:
                return replies
            await refresh_slots(self.redis)
            await asyncio.sleep(0.01 * attempt)
        raise AssertionError("unreachable")

    async def run_on(
        self, client: Any, commands: list[Command], extra: float = 0.0, deadline: float | None = None
    ) -> list[Any]:
        if id(client) not in self._scripts_loaded and uses_scripts(commands):
            await _execute(client, load_script_commands(), 0.0, deadline)
            self._scripts_loaded.add(id(client))
        replies = await _execute(client, commands, extra, deadline)
        if any(is_noscript(r) for r in replies):
            await _execute(client, load_script_commands(), 0.0, deadline)
            replies = await _execute(client, commands, extra, deadline)
        return replies

    async def call(self, key: str, *command: Any) -> Any:
        return raise_error((await self.run(key, [command]))[0])

    async def drive(
        self, flow: Generator[Request, Any, Acquired], deadline: float | None, side: bool, ticket: Ticket
    ) -> tuple[Acquired, float]:
        pubsub: Any = None
        sent = time.monotonic()
        before = _cancel_requests()
        try:
            reply: Any = None
            while True:
                _raise_if_cancelled(before)
                try:
                    request = flow.send(reply)
                except StopIteration as done:
                    result: Acquired = done.value
                    return result, sent
                if isinstance(request, Run):
                    sent = time.monotonic()
                    if deadline is not None and sent >= deadline:
                        raise RedisTimeoutError("no reply from the server in time: the outcome is unknown")
                    ticket.sent = True
                    reply = await self.run(request.key, request.commands, request.extra, deadline, side)
                elif isinstance(request, Listen):
                    pubsub = await self._subscribe(request, deadline)
                    reply = None
                elif isinstance(request, Await):
                    reply = await self._next_message(pubsub, _bounded(request.seconds, deadline))
                else:
                    await asyncio.sleep(_bounded(request.seconds, deadline))
                    reply = None
        finally:
            flow.close()
            if pubsub is not None:
                await _close(pubsub)

    async def _subscribe(self, request: Listen, deadline: float | None) -> Any:
        """Subscribe on a side connection of this client, not the application's pool."""
        pubsub = (await self.own(request.key, side=True)).pubsub()
        try:
            if self.cluster and hasattr(pubsub, "ssubscribe"):
                await pubsub.ssubscribe(request.channel)
            elif self.cluster:  # redis-py without sharded pub/sub in this client
                await pubsub.execute_command("SSUBSCRIBE", request.channel)
            else:
                await pubsub.subscribe(request.channel)
            until = time.monotonic() + SUBSCRIBE_TIMEOUT
            if deadline is not None:
                until = min(until, deadline)
            while (left := until - time.monotonic()) > 0:
                message = await pubsub.get_message(timeout=left)
                if message is not None and message["type"] in ("subscribe", "ssubscribe"):
                    return pubsub
            raise RedisTimeoutError(f"no confirmation of the subscription to {request.channel}")
        except BaseException:
            await _close(pubsub)
            raise

    @staticmethod
    async def _next_message(pubsub: Any, seconds: float) -> bool:
        # get_message(timeout=) returning None here is "no message yet", not a reply.
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            message = await pubsub.get_message(timeout=left)
            if message is not None and message["type"] in ("message", "smessage"):
                return True
        return False

    # -- what an interrupted exchange may have left ---------------------------------------
    async def reconcile(self, suspect: Suspect) -> bool:
        """As the blocking client's: the server's count down to the book's (False: retry later)."""
        if self.mode_now is None:
            return True
        key, owner = suspect.key, suspect.owner
        if suspect.kind == SEM:  # a permit's ids: released (what was not held is not counted)
            if self.sem_mode_now is None or time.monotonic() < suspect.after:
                return self.sem_mode_now is None
            command = SemTarget(self.sem_mode_now, key, self.cluster).release(suspect.ids)
            raise_error((await self.run_on(await self.own(key), [command]))[0])
            return True
        if self.registry.busy(key, owner):
            return False
        own = await self.own(key)
        count = raise_error((await self.run_on(own, [("HGET", key, owner)]))[0])
        count = 0 if count is None else int(count)
        keep = self.registry.count(key, owner)
        if count > keep:
            target = Target(self.mode_now, key, self.cluster, suspect.kind)
            for reply in await self.run_on(own, reconcile_commands(target, owner, count - keep)):
                if reply is None:
                    break
                raise_error(reply)
        self.registry.set_count(key, owner, min(count, keep))
        return True

    async def _settle(self, suspect: Suspect, now: bool) -> None:
        done = False
        try:
            if now:
                done = await self.reconcile(suspect)
        except Exception as error:
            log.info("could not check %r after an interrupted call now (%r); the watchdog retries", suspect.key, error)
        finally:
            if suspect.kind == SEM:  # released once more by the watchdog a moment later
                suspect, done = suspect._replace(after=time.monotonic() + SETTLE_AGAIN), False
            if not done:
                self.registry.suspect(suspect)
                self.ensure_watchdog()

    async def settle(
        self,
        key: str,
        owner: str,
        lease_s: float,
        error: BaseException | None = None,
        kind: str = PLAIN,
        ids: tuple[bytes, ...] = (),
    ) -> None:
        """After an acquire or release whose replies were not all read (an exception, a
        cancellation, a timeout): release what the server granted beyond the book (a
        semaphore's permit ids: now, and once more a moment later). Runs in a task of its own
        that a second cancellation does not stop; a server that did not answer is left to the
        watchdog."""
        suspect = Suspect(key, owner, time.monotonic() + lease_s + 1.0, kind, ids)
        now = not isinstance(error, (RedisConnectionError, RedisTimeoutError))
        task = asyncio.get_running_loop().create_task(self._settle(suspect, now))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        await asyncio.shield(task)

    # -- watchdog -------------------------------------------------------------------------
    def ensure_watchdog(self) -> None:
        if (self._watchdog is None or self._watchdog.done()) and not self.closed:
            self._watchdog = asyncio.get_running_loop().create_task(self._watch(), name="redislock-watchdog")

    async def _watch(self) -> None:
        pause = 0.0
        while True:
            await asyncio.sleep(pause)
            try:
                pause = await self.tick()
            except Exception:  # retried on the next tick
                log.warning("lock renewal failed; retrying next tick", exc_info=True)
                pause = 0.1

    async def tick(self) -> float:
        period = self.lease_ms / 3000
        due, dropped = self.registry.take_due(time.monotonic(), period / 10)
        for hold, why in dropped:
            log.warning("lock %r of %r is no longer renewed: %s", hold.key, hold.owner, why)
        await self.renew(due)
        await self.expire()
        for suspect in self.registry.take_suspects():
            try:
                done = await self.reconcile(suspect)
            except Exception:
                done = False
            if not done:
                self.registry.suspect(suspect)
        return _next_pause(self.registry, period)

    async def renew(self, holds: list[Hold]) -> None:
        if not holds or self.mode_now is None:
            return
        now = time.monotonic()
        by_node: dict[int, tuple[Any, list[tuple[Hold, int]]]] = {}
        for hold in holds:
            ms = hold.renewal_ms(now, self.lease_ms)
            if ms is None:  # max_hold reached: left to expire (then lost)
                self.registry.retry(hold, hold.expires)
                continue
            client = await self.own(hold.key)
            by_node.setdefault(id(client), (client, []))[1].append((hold, ms))
        for client, group in by_node.values():
            slot = _slot if self.cluster else _one_slot
            batch = renew_batch(self.mode_now, self.sem_mode_now, self.cluster, group, slot)
            leases = {id(h): ms for h, ms in group}
            sent = time.monotonic()
            try:
                replies = await self.run_on(client, [command for command, _ in batch])
            except Exception:
                log.warning("lock renewal failed; retrying", exc_info=True)
                for hold, _ in group:
                    self.registry.retry(hold, sent + min(hold.lease / 3, 1.0))
                continue
            if self.cluster and any(is_redirect(r) for r in replies):
                await refresh_slots(self.redis)
            for reply, (_, members) in zip(replies, batch):
                for hold, renewed in renew_outcomes(reply, members):
                    if renewed:
                        self.registry.renewed(hold, sent, leases[id(hold)] / 1000)
                    elif renewed is False and self.registry.lose(hold):
                        await self.notify(hold)
                    elif renewed is None:
                        self.registry.retry(hold, sent + min(hold.lease / 3, 1.0))

    async def expire(self) -> None:
        for hold in self.registry.expired(time.monotonic()):
            if self.registry.lose(hold):
                log.warning("lock %r lost: no renewal for a whole lease, or max_hold reached", hold.key)
                await self.notify(hold)

    @staticmethod
    async def notify(hold: Hold) -> None:
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
            await asyncio.wait({task}, timeout=1.5)  # a renewal in flight ends by its io timeout
        clients = list(self._nodes.values()) + list(self._own.values())
        self._nodes, self._own = {}, {}
        for client in clients:
            await _close(client)
            await client.connection_pool.disconnect()  # our own pool: aclose() leaves it open


class LockClient:
    """The asyncio ``LockClient`` over ``redis.asyncio.Redis`` or ``redis.asyncio.cluster.RedisCluster``."""

    def __init__(self, redis: Any, lease: float = 30.0, mode: str = "auto", max_hold: float | None = None) -> None:
        if not isinstance(redis, (AsyncRedis, AsyncRedisCluster)):
            raise TypeError(
                "redislock.asyncio.LockClient needs a redis.asyncio.Redis or redis.asyncio.RedisCluster,"
                f" not {type(redis).__name__} (use redislock.LockClient for blocking clients)"
            )
        self._engine = _Engine(redis, check_mode(mode), lease_ms(lease), check_max_hold(max_hold))
        self.redis = redis
        self.lease = float(lease)
        self.max_hold = self._engine.max_hold
        self._finalizer = weakref.finalize(self, self._engine.stop_soon)

    @property
    def id(self) -> str:
        """This client's UUID; a forked child gets a new one."""
        return self._engine.id

    @property
    def mode(self) -> str:
        """``"module"`` or ``"lua"``: detected once; before any await over a short blocking
        connection of the application's kind (TCP, unix socket, TLS, Sentinel-managed)."""
        return self._engine.mode_blocking()

    async def detect_mode(self) -> str:
        """The mode, detected without blocking the event loop."""
        return await self._engine.mode()

    detect = detect_mode

    def lock(
        self,
        name: str | bytes,
        owner: str | None = None,
        fenced: bool = False,
        sync_replicas: int = 0,
        sync_timeout: float = 1.0,
        on_lost: OnLost | None = None,
        timeout: float | None = None,
        max_hold: Any = DEFAULT,
    ) -> Lock:
        return Lock(self, name, owner, fenced, sync_replicas, sync_timeout, on_lost, timeout, max_hold)

    def rwlock(
        self,
        name: str | bytes,
        owner: str | None = None,
        fenced: bool = False,
        sync_replicas: int = 0,
        sync_timeout: float = 1.0,
        on_lost: OnLost | None = None,
        timeout: float | None = None,
        max_hold: Any = DEFAULT,
    ) -> RWLock:
        """A read-write lock (see ``redislock.LockClient.rwlock``): ``rw.read`` / ``rw.write``."""
        return RWLock(self, name, owner, fenced, sync_replicas, sync_timeout, on_lost, timeout, max_hold)

    def semaphore(
        self,
        name: str | bytes,
        permits: int | None = None,
        timeout: float | None = None,
        on_lost: OnLost | None = None,
        max_hold: Any = DEFAULT,
    ) -> Semaphore:
        """A semaphore with leased permits (see ``redislock.LockClient.semaphore``); ``permits``
        is set (if the semaphore does not exist) before the object's first command."""
        return Semaphore(self, name, permits, timeout, on_lost, max_hold)

    def synchronized(
        self, name: str | bytes, *, timeout: float | None = None, lease: float | None = None, **options: Any
    ) -> Callable[[F], F]:
        """A decorator for coroutine functions: every call runs inside ``async with`` the lock
        ``name`` (``redislock.LockTimeout`` when ``timeout`` runs out)."""
        lock = self.lock(name, timeout=timeout, **options)
        if lease is not None:
            lease_ms(lease)
        return _synchronized(lock, lease, coroutine=True)

    async def close(self) -> None:
        """Stop the watchdog task and close this client's own connections (within 2 s)."""
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
    """The asyncio ``Lock``; the default owner is ``<client id>:<task number>``.

    The owner is taken when a method is *called*, in the calling task, so
    ``await asyncio.wait_for(lock.acquire(), t)`` acquires for the caller even on Python
    versions where ``wait_for`` runs the coroutine in a task of its own.
    """

    _kind = PLAIN  # which commands and scripts it sends (see _core.Target)
    _suffix = ""  # the owner's hash field is owner + _suffix

    def __init__(
        self,
        client: LockClient,
        name: str | bytes,
        owner: str | None = None,
        fenced: bool = False,
        sync_replicas: int = 0,
        sync_timeout: float = 1.0,
        on_lost: OnLost | None = None,
        timeout: float | None = None,
        max_hold: Any = DEFAULT,
    ) -> None:
        self.name = check_name(name)
        self._pinned = check_owner(owner)
        self._replicas, self._sync_ms = check_replicas(sync_replicas, sync_timeout)
        self.timeout = check_timeout(timeout)
        self.on_lost = check_callback(on_lost)
        self.max_hold = client.max_hold if max_hold is DEFAULT else check_max_hold(max_hold)
        self.client = client
        self.fenced = bool(fenced)

    @property
    def owner(self) -> str:
        return self._pinned or f"{self.client.id}:{_task_number()}"

    def _field(self, owner: str | None = None) -> str:
        """The owner's field in the lock's hash: the book's name for its holds."""
        return (owner or self.owner) + self._suffix

    def _caller(self) -> str | None:
        """The owner of the calling task, or None outside a task (then taken when run)."""
        return self._pinned or (self.owner if _in_task() else None)

    def _holder(self) -> Alive | None:
        return None if self._pinned else _task_alive()

    @property
    def _engine(self) -> _Engine:
        return self.client._engine

    def acquire(
        self, blocking: bool = True, timeout: Any = DEFAULT, lease: float | None = None
    ) -> Coroutine[Any, Any, bool]:
        """Take the lock (see ``redislock.Lock.acquire``); the owner is the calling task."""
        if timeout is DEFAULT:
            timeout = self.timeout if blocking else None
        wait = check_timeout(timeout, blocking)
        if lease is not None:
            lease_ms(lease)
        return self._acquire_as(self._caller(), blocking, wait, lease, holder=self._holder())

    async def _acquire_as(
        self,
        owner: str | None,
        blocking: bool,
        wait: float | None,
        lease: float | None,
        deadline: float | None = None,
        side: bool = False,
        holder: Alive | None = None,
    ) -> bool:
        owner = owner or self.owner
        if holder is None and not self._pinned:
            holder = _task_alive()
        engine = self._engine
        hold_ms = hold_lease_ms(lease, engine.lease_ms, self.max_hold)
        if engine.closed:
            raise RuntimeError("the LockClient is closed")
        if self._kind == WRITE and blocking and wait != 0 and engine.registry.count(self.name, owner) > 0:
            raise upgrade_error(self.name, owner)  # its own read holds: it would wait for itself
        field = owner + self._suffix
        ticket = Ticket(self.name, field, self._kind)
        try:
            if lease is None:
                engine.ensure_watchdog()
            engine.registry.begin(ticket)
            deadline = hard_deadline(wait, self._sync_ms, self._replicas, engine.grace, deadline)
            target = await engine.target(self.name, deadline, self._kind)
            if engine.cluster and target.mode == LUA:
                check_cluster_name(self.name, self.fenced, self._kind)
            plan = AcquirePlan(target, field, hold_ms, self.fenced, self._replicas, self._sync_ms, blocking, wait)
            waits = target.mode == MODULE and bool(blocking) and wait != 0
            got, sent = await engine.drive(acquire_flow(plan), deadline, side, ticket)
            if not got.acquired:
                engine.registry.finish(ticket)
                return False
            start = time.monotonic() if waits else sent
            return engine.registry.record(
                ticket, lease is None, got.token, self.on_lost, self, hold_ms / 1000, start, holder, self.max_hold
            )
        except BaseException as error:
            engine.registry.abort(ticket)
            if ticket.sent:
                await engine.settle(self.name, field, hold_ms / 1000, error, self._kind)
            raise

    def release(self) -> Coroutine[Any, Any, None]:
        return self._release_as(self._caller())

    async def _release_as(self, owner: str | None) -> None:
        ticket: Ticket | None = None
        try:
            field = self._field(owner)
            engine = self._engine
            ticket = Ticket(self.name, field, self._kind)
            hold = engine.registry.begin_release(ticket)
            rearm = engine.lease_ms if hold is not None and hold.watch else 0
            command = (await engine.target(self.name, kind=self._kind)).release(field, rearm)
            ticket.sent = True
            freed = parse_release((await engine.run(self.name, [command], side=True))[0])
            # A read release replies 0 while other owners hold the lock, even when this owner's last
            # hold is gone: the book's count says whether it keeps one.
            engine.registry.end_release(ticket, None if self._kind == READ and not freed else not freed)
        except NotOwnedError:
            if ticket is not None:
                self._engine.registry.end_release(ticket, False)
            raise
        except BaseException as error:
            engine = self._engine
            ticket = ticket or Ticket(self.name, self._field(owner), self._kind)
            if ticket.hold is None and not ticket.applied:
                ticket.hold = engine.registry.get(ticket.key, ticket.owner)
            if engine.registry.end_release(ticket, None) or (ticket.sent and ticket.hold is not None):
                await engine.settle(ticket.key, ticket.owner, engine.lease_ms / 1000, error, self._kind)
            raise

    def extend(self, additional_time: float, replace_ttl: bool = False) -> Coroutine[Any, Any, None]:
        """As redis-py's ``Lock.extend``: add ``additional_time`` seconds to the lease left (or
        with ``replace_ttl=True`` set it). NotOwnedError if this owner does not hold the lock."""
        ms = lease_ms(additional_time, "additional_time")
        return self._extend(self._caller(), ms, replace_ttl)

    async def _extend(self, owner: str | None, ms: int, replace_ttl: bool) -> None:
        owner = self._field(owner)
        engine = self._engine
        target = await engine.target(self.name, kind=self._kind)
        if not replace_ttl:
            pttl = int(raise_error((await engine.run(self.name, [("PTTL", self.name)], side=True))[0]))
            ms = ms + pttl if pttl > 0 else ms
        sent = time.monotonic()
        if not parse_renew((await engine.run(self.name, [target.renew(owner, ms)], side=True))[0]):
            hold = engine.registry.get(self.name, owner)
            if hold is not None:
                engine.registry.lose(hold)
            raise NotOwnedError("the lock is not held by this owner")
        hold = engine.registry.get(self.name, owner)
        if hold is not None and not hold.watch:
            hold.lease = ms / 1000
            hold.expires = sent + hold.lease

    async def locked(self) -> bool:
        """Whether anyone holds the lock (see ``redislock.Lock.locked``)."""
        target = await self._engine.target(self.name, kind=self._kind)
        return parse_locked(self._kind, await self._engine.call(self.name, *target.locked()))

    async def owned(self) -> bool:
        """Whether this owner holds the lock; False without a round trip when the hold was
        declared lost or its lease ran out locally."""
        owner = self._field()
        hold = self._engine.registry.get(self.name, owner)
        if hold is not None and (hold.lost or time.monotonic() >= hold.expires):
            return False
        return bool(await self._engine.call(self.name, "HEXISTS", self.name, owner))

    async def hold_count(self) -> int:
        count = await self._engine.call(self.name, "HGET", self.name, self._field())
        return 0 if count is None else int(count)

    async def ttl(self) -> float | None:
        pttl = int(await self._engine.call(self.name, "PTTL", self.name))
        if pttl == -2:
            return None
        return math.inf if pttl < 0 else pttl / 1000

    async def force_release(self) -> bool:
        """See ``redislock.Lock.force_release`` (a read-write lock's side frees only its mode)."""
        engine = self._engine
        if self._kind == PLAIN:
            engine.registry.drop_key(self.name)
        command = (await engine.target(self.name, kind=self._kind)).force_release()
        freed = bool(int(await engine.call(self.name, *command)))
        if freed:
            engine.registry.drop_key(self.name)
        return freed

    @property
    def token(self) -> int | None:
        hold = self._engine.registry.get(self.name, self._field())
        return hold.token if hold is not None and not hold.lost else None

    async def __aenter__(self) -> Lock:
        if not await self.acquire():
            raise timed_out(self.name, self.timeout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()

    def __repr__(self) -> str:
        return f"<redislock.asyncio.Lock name={self.name!r}>"


class ReadLock(Lock):
    """The asyncio read side of a read-write lock (see ``redislock.ReadLock``)."""

    _kind = READ

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fenced = False

    def __repr__(self) -> str:
        return f"<redislock.asyncio.ReadLock name={self.name!r}>"


class WriteLock(Lock):
    """The asyncio write side of a read-write lock (see ``redislock.WriteLock``)."""

    _kind = WRITE
    _suffix = WRITE_SUFFIX

    def __repr__(self) -> str:
        return f"<redislock.asyncio.WriteLock name={self.name!r}>"


class RWLock:
    """The asyncio read-write lock: ``read`` and ``write`` share the hash ``name``."""

    def __init__(
        self,
        client: LockClient,
        name: str | bytes,
        owner: str | None = None,
        fenced: bool = False,
        sync_replicas: int = 0,
        sync_timeout: float = 1.0,
        on_lost: OnLost | None = None,
        timeout: float | None = None,
        max_hold: Any = DEFAULT,
    ) -> None:
        options = (owner, fenced, sync_replicas, sync_timeout, on_lost, timeout, max_hold)
        self.read = ReadLock(client, name, *options)
        self.write = WriteLock(client, name, *options)
        self.name = self.read.name
        self.client = client

    async def force_release(self) -> bool:
        """Free the lock whatever its mode; True if it was held."""
        engine = self.client._engine
        target = await engine.target(self.name, kind=WRITE)
        replies = await engine.run(self.name, target.force_release_any())
        freed = any(int(raise_error(reply)) == 1 for reply in replies)
        engine.registry.drop_key(self.name)
        return freed

    def __repr__(self) -> str:
        return f"<redislock.asyncio.RWLock name={self.name!r}>"


class Semaphore:
    """The asyncio semaphore with leased permits (see ``redislock.Semaphore``).

    ``permits=`` on ``locks.semaphore(...)`` is set (only if the semaphore does not exist yet)
    before this object's first command, not at construction: ``await sem.try_set_permits(n)``
    does it explicitly."""

    def __init__(
        self,
        client: LockClient,
        name: str | bytes,
        permits: int | None = None,
        timeout: float | None = None,
        on_lost: OnLost | None = None,
        max_hold: Any = DEFAULT,
    ) -> None:
        self.name = check_name(name)
        self._initial = None if permits is None else check_total(permits)
        self.timeout = check_timeout(timeout)
        self.on_lost = check_callback(on_lost)
        self.max_hold = client.max_hold if max_hold is DEFAULT else check_max_hold(max_hold)
        self.client = client

    @property
    def _engine(self) -> _Engine:
        return self.client._engine

    async def detect_mode(self) -> str:
        """``"module"`` (LOCK.SEM* commands) or ``"lua"`` (our scripts): what this semaphore uses."""
        return await self._engine.sem_mode(self.name)

    async def _ready(self) -> None:
        """The permits given to ``locks.semaphore(..., permits=n)``, set once before first use."""
        initial = self._initial
        if initial is not None:
            await self._try_set(initial)
            self._initial = None

    async def _call(self, command_of: Callable[[SemTarget], Command], side: bool = False) -> Any:
        engine = self._engine
        target = await engine.sem_target(self.name)
        return raise_error((await engine.run(self.name, [command_of(target)], side=side))[0])

    def try_set_permits(self, permits: int) -> Coroutine[Any, Any, bool]:
        """Set the permits only if the semaphore does not exist yet; True if it was set."""
        total = check_total(permits)
        self._initial = None
        return self._try_set(total)

    async def _try_set(self, total: int) -> bool:
        return parse_count(await self._call(lambda t: t.try_set_permits(total))) == 1

    def set_permits(self, permits: int) -> Coroutine[Any, Any, None]:
        """Make the total (available + held) ``permits`` (see ``redislock.Semaphore``)."""
        total = check_total(permits)
        return self._set(total)

    async def _set(self, total: int) -> None:
        await self._ready()
        await self._call(lambda t: t.set_permits(total))

    async def available(self) -> int:
        """The permits available now (expired permits counted back first)."""
        await self._ready()
        engine = self._engine
        target = await engine.sem_target(self.name)
        return parse_available(target.mode, (await engine.run(self.name, [target.available()]))[0])

    async def info(self) -> dict[str, Any]:
        """LOCK.SEMINFO (module mode) as a dict."""
        await self._ready()
        engine = self._engine
        if await engine.sem_mode(self.name) != MODULE:
            raise RuntimeError("semaphore info needs the module's LOCK.SEMINFO (this semaphore is in lua mode)")
        return info_map(await engine.call(self.name, "LOCK.SEMINFO", self.name))

    def acquire(self, permits: int = 1, timeout: Any = DEFAULT, lease: float | None = None) -> _Acquiring:
        """Take ``permits`` permits together: ``p = await sem.acquire(...)``, or
        ``async with sem.acquire(...) as p:`` (released on exit). ``redislock.LockTimeout``
        when ``timeout`` (default: the semaphore's) runs out; see ``redislock.Semaphore.acquire``."""
        if timeout is DEFAULT:
            timeout = self.timeout
        count, wait = check_acquire_permits(permits), check_timeout(timeout)
        if lease is not None:
            lease_ms(lease)
        return _Acquiring(self._acquire_or_raise(count, wait, lease))

    async def _acquire_or_raise(self, count: int, wait: float | None, lease: float | None) -> Permit:
        return await self._acquire(count, wait, lease, True)  # type: ignore[return-value]

    def try_acquire(
        self, permits: int = 1, timeout: float | None = 0.0, lease: float | None = None
    ) -> Coroutine[Any, Any, Permit | None]:
        """As ``acquire``, but None when ``timeout`` runs out (by default one attempt)."""
        count, wait = check_acquire_permits(permits), check_timeout(timeout)
        if lease is not None:
            lease_ms(lease)
        return self._acquire(count, wait, lease)

    async def _acquire(
        self, count: int, wait: float | None, lease: float | None, or_raise: bool = False
    ) -> Permit | None:
        engine = self._engine
        hold_ms = hold_lease_ms(lease, engine.lease_ms, self.max_hold)
        if engine.closed:
            raise RuntimeError("the LockClient is closed")
        await self._ready()
        ids = new_ids(count)
        ticket = Ticket(self.name, permit_owner(ids), SEM)
        hold: Hold | None = None
        try:
            if lease is None:
                engine.ensure_watchdog()
            deadline = hard_deadline(wait, 0, 0, engine.grace, None)
            target = await engine.sem_target(self.name, deadline)
            plan = SemAcquirePlan(target, ids, hold_ms, True, wait)
            got, sent = await engine.drive(sem_acquire_flow(plan), deadline, False, ticket)
            if not got.acquired:
                if or_raise:
                    raise timed_out_permits(self.name, count, wait)
                return None
            start = time.monotonic() if target.mode == MODULE and wait != 0 else sent
            permit = Permit(self, ids, lease)
            hold = permit._hold = permit_hold(
                self.name, ids, lease is None, self.on_lost, permit, hold_ms / 1000, start, self.max_hold
            )
            if lease is None:
                engine.registry.add(hold)
            return permit
        except LockTimeout:
            raise
        except BaseException as error:
            # Cancelled, timed out or failed with the outcome unknown: the ids this call
            # generated are given back (now, and once more a moment later).
            if hold is not None:
                engine.registry.remove(hold)
            if ticket.sent:
                await engine.settle(self.name, ticket.owner, hold_ms / 1000, error, SEM, tuple(ids))
            raise

    def release(self, permit: Permit) -> Coroutine[Any, Any, None]:
        """``permit.release()`` (see ``redislock.Semaphore.release``)."""
        if not isinstance(permit, Permit) or permit.name != self.name or permit.client is not self.client:
            raise ValueError(f"{permit!r} is not a permit of {self!r}")
        return permit.release()

    def __repr__(self) -> str:
        return f"<redislock.asyncio.Semaphore name={self.name!r}>"


class _Acquiring(Coroutine[Any, Any, "Permit"]):
    """What ``Semaphore.acquire`` returns: a coroutine (await it, or run it as a task) that is
    also an async context manager whose exit releases the permit."""

    def __init__(self, coroutine: Coroutine[Any, Any, Permit]) -> None:
        self._coroutine = coroutine
        self._permit: Permit | None = None

    def send(self, value: Any) -> Any:
        return self._coroutine.send(value)

    def throw(self, *args: Any) -> Any:
        return self._coroutine.throw(*args)

    def close(self) -> None:
        self._coroutine.close()

    def __await__(self) -> Generator[Any, None, Permit]:
        return self._coroutine.__await__()

    async def __aenter__(self) -> Permit:
        self._permit = await self._coroutine
        return self._permit

    async def __aexit__(self, *exc: object) -> None:
        if self._permit is not None:
            await self._permit.release()


class Permit:
    """The asyncio ``Permit`` (see ``redislock.Permit``): ``await p.release()``,
    ``await p.renew()``, ``await p.owned()``; ``async with p:`` releases on exit."""

    def __init__(self, semaphore: Semaphore, ids: list[bytes], lease: float | None) -> None:
        self.semaphore = semaphore
        self.client = semaphore.client
        self.name = semaphore.name
        self.ids: list[bytes] = list(ids)
        self.lease = None if lease is None else lease_ms(lease) / 1000
        self._hold: Hold | None = None
        self._released = False

    @property
    def released(self) -> bool:
        return self._released

    def _gone(self) -> bool:
        hold = self._hold
        return self._released or hold is None or hold.lost or time.monotonic() >= hold.expires

    async def owned(self) -> bool:
        """Whether every permit is still held (False without a round trip once released, lost
        or past its lease locally)."""
        if self._gone():
            return False
        engine = self.client._engine
        target = await engine.sem_target(self.name)
        return still_held(await engine.call(self.name, *target.scores(self.ids)))

    held = owned

    async def release(self) -> None:
        """Give the permits back, exactly once (see ``redislock.Permit.release``); cancelled,
        it still gives them back."""
        if self._released:
            raise NotOwnedError(f"this permit of {self.name!r} was already released")
        self._released = True
        engine = self.client._engine
        hold = self._hold
        lost = hold is not None and (hold.lost or (hold.watch and time.monotonic() >= hold.expires))
        if hold is not None:
            engine.registry.remove(hold)
        try:
            command = (await engine.sem_target(self.name)).release(self.ids)
            returned = parse_count((await engine.run(self.name, [command], side=True))[0])
        except BaseException as error:
            if not isinstance(error, ResponseError):  # sent or not: given back
                owner = permit_owner(self.ids)
                await engine.settle(self.name, owner, held_for(hold, engine.lease_ms), error, SEM, tuple(self.ids))
            raise
        if lost or returned < len(self.ids):
            raise NotOwnedError(
                f"{len(self.ids) - returned} of the {len(self.ids)} permits of {self.name!r} had expired or were"
                " lost (the others were given back)"
                if returned < len(self.ids)
                else f"the permits of {self.name!r} were lost (no renewal for a whole lease)"
            )

    async def renew(self, lease: float | None = None) -> None:
        """Reset the lease of every permit to ``lease`` seconds from now (see
        ``redislock.Permit.renew``)."""
        engine = self.client._engine
        hold = self._hold
        if lease is not None:
            ms = lease_ms(lease)
        else:
            ms = lease_ms(self.lease) if self.lease is not None else engine.lease_ms
        if self._gone() or hold is None:
            raise NotOwnedError(f"this permit of {self.name!r} is no longer held")
        target = await engine.sem_target(self.name)
        sent = time.monotonic()
        renewed = parse_count((await engine.run(self.name, [target.renew(self.ids, ms)], side=True))[0])
        if renewed < len(self.ids):
            if not engine.registry.lose(hold):
                hold.lost = True
            raise NotOwnedError(f"{len(self.ids) - renewed} of the permits of {self.name!r} are no longer held")
        if hold.watch:
            engine.registry.renewed(hold, sent, ms / 1000)
        else:
            self.lease = ms / 1000
            hold.lease = self.lease
            hold.expires = sent + self.lease

    def extend(self, lease: float) -> Coroutine[Any, Any, None]:
        """Set the lease left of every permit to ``lease`` seconds (``renew(lease)``)."""
        lease_ms(lease)
        return self.renew(lease)

    async def __aenter__(self) -> Permit:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()

    def __repr__(self) -> str:
        return f"<redislock.asyncio.Permit of {self.name!r}: {len(self.ids)} permit(s)>"


class MultiLock:
    """The asyncio MultiLock: components tried concurrently, decided as soon as the outcome
    is known; late components are cancelled (and give back whatever they took). ``timeout``
    is the default wait of ``acquire()`` and of ``async with``."""

    _majority = False

    def __init__(self, locks: Iterable[Lock], timeout: float | None = None) -> None:
        self.locks: list[Lock] = check_locks(locks, Lock)
        self.timeout = check_timeout(timeout)
        self.validity: float | None = None
        self._held: dict[tuple[str, ...], list[list[int]]] = {}

    def _owners(self) -> tuple[str, ...]:
        return tuple(lock.owner for lock in self.locks)

    def acquire(
        self, blocking: bool = True, timeout: Any = DEFAULT, lease: float | None = None
    ) -> Coroutine[Any, Any, bool]:
        """Take every component (a majority for RedLock); the owners are the calling task's."""
        if timeout is DEFAULT:
            timeout = self.timeout if blocking else None
        wait = check_timeout(timeout, blocking)
        if lease is not None:
            lease_ms(lease)
        caller = _in_task()
        return self._acquire(self._owners() if caller else None, blocking, wait, lease, _task_alive())

    async def _acquire(
        self,
        owners: tuple[str, ...] | None,
        blocking: bool,
        wait: float | None,
        lease: float | None,
        holder: Alive | None,
    ) -> bool:
        lease_s = self.locks[0].client.lease if lease is None else lease_ms(lease) / 1000
        owners = owners or self._owners()
        holder = holder or _task_alive()
        count = len(self.locks)
        need = quorum(count, self._majority)
        deadline = None if wait is None else time.monotonic() + wait
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            each = attempt_wait(remaining, count, self._majority) if blocking else 0.0
            started = time.monotonic()
            until = started + each + COMPONENT_GRACE
            if deadline is not None:
                until = min(until, deadline + COMPONENT_GRACE)
            taken = await self._attempt(owners, each, lease, until, need, holder)
            if taken is not None:
                validity = redlock_validity(lease_s, time.monotonic() - started)
                if not self._majority or validity > 0:
                    self._held.setdefault(owners, []).append(taken)
                    self.validity = validity if self._majority else None
                    return True
                await self._give_back(taken, owners)
            left = None if deadline is None else deadline - time.monotonic()
            if not blocking or (left is not None and left <= 0):
                return False
            pause = random.uniform(0.005, 0.05)
            await asyncio.sleep(pause if left is None else min(pause, left))

    async def _attempt(
        self,
        owners: tuple[str, ...],
        each: float,
        lease: float | None,
        until: float,
        need: int,
        holder: Alive | None,
    ) -> list[int] | None:
        count = len(self.locks)
        tasks = {
            asyncio.ensure_future(lock._acquire_as(owner, each > 0, each, lease, until, side=True, holder=holder)): i
            for i, (lock, owner) in enumerate(zip(self.locks, owners))
        }
        taken: list[int] = []
        failed = 0
        pending = set(tasks)
        success = False
        try:
            while pending:
                left = until - time.monotonic()
                if left <= 0:
                    break
                done, pending = await asyncio.wait(pending, timeout=left, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    if _took(task):
                        taken.append(tasks[task])
                    else:
                        if not task.cancelled() and task.exception() is not None:
                            log.info("a component lock failed: %r", task.exception())
                        failed += 1
                if len(taken) >= need:
                    success = True
                    break
                if failed > count - need:
                    break
        finally:
            for task in pending:
                task.cancel()  # a late component gives back what it took when cancelled
            if pending:
                # Cancelled components give back what they may have taken before this returns
                # (so a retry by the same owner finds the servers settled); a hung server's
                # clean-up goes on in the background. After a success, do not wait for it.
                settle = 0.1 if success else max(0.1, until - time.monotonic())
                await asyncio.wait(pending, timeout=settle)
            # A component that finished with the lock after the decision (before its cancel
            # took effect) is given back too, now or when it finishes.
            late = [tasks[t] for t in pending if t.done() and _took(t)]
            for task in pending:
                if not task.done():
                    task.add_done_callback(self._give_back_later(tasks[task], owners))
            back = late if success else sorted(taken) + late
            if back:
                await asyncio.shield(self._give_back(back, owners))
        return sorted(taken) if success else None

    def _give_back_later(self, i: int, owners: tuple[str, ...]) -> Callable[[asyncio.Future[Any]], None]:
        def done(task: asyncio.Future[Any]) -> None:
            if _took(task):
                late = asyncio.ensure_future(_release_quietly(self.locks[i], owners[i]))
                _late_releases.add(late)
                late.add_done_callback(_late_releases.discard)

        return done

    async def _give_back(self, taken: list[int], owners: tuple[str, ...]) -> None:
        await asyncio.gather(*(_release_quietly(self.locks[i], owners[i]) for i in taken))

    def release(self) -> Coroutine[Any, Any, None]:
        return self._release(self._owners() if _in_task() else None)

    async def _release(self, owners: tuple[str, ...] | None) -> None:
        owners = owners or self._owners()
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
        if not await self.acquire():
            raise LockTimeout(f"could not acquire {self!r} within {self.timeout} s")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()

    def __repr__(self) -> str:
        return f"<redislock.asyncio.{type(self).__name__} of {len(self.locks)} locks>"


class RedLock(MultiLock):
    """The asyncio RedLock: a majority of the components and a positive validity."""

    _majority = True


_late_releases: set[asyncio.Future[Any]] = set()


def _took(task: asyncio.Future[Any]) -> bool:
    return not task.cancelled() and task.exception() is None and task.result() is True


async def _release_quietly(lock: Lock, owner: str) -> None:
    try:
        await lock._release_as(owner)
    except Exception as error:
        log.info("giving back %r failed: %r", lock, error)


__all__ = [
    "Lock",
    "LockClient",
    "LockError",
    "LockTimeout",
    "MultiLock",
    "NotOwnedError",
    "Permit",
    "RWLock",
    "ReadLock",
    "RedLock",
    "ReplicaSyncError",
    "Semaphore",
    "UpgradeError",
    "WriteLock",
]
