"""The blocking client: ``LockClient``, ``Lock``, ``RWLock``, ``Semaphore``, ``MultiLock`` and
``RedLock``."""

from __future__ import annotations

import functools
import inspect
import itertools
import logging
import math
import os
import random
import threading
import time
import uuid
import weakref
from collections.abc import Generator, Iterable
from typing import Any, Callable, TypeVar

from redis import Redis
from redis.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ._compat import cluster_node_pool, get_connection, own_client, refresh_slots, socket_timeout_of, wait_readable
from ._core import (
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
    thread_alive,
    timed_out,
    upgrade_error,
    uses_scripts,
)
from ._errors import LockTimeout, NotOwnedError
from ._sem import (
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
from ._sem import acquire_flow as sem_acquire_flow
from ._sem import check_cluster_name as check_sem_cluster_name
from ._sem import timed_out as timed_out_permits

log = logging.getLogger("redislock")

OnLost = Callable[..., Any]
MAX_REDIRECTS = 5
SUBSCRIBE_TIMEOUT = 7.5  # as Redisson's subscriptionTimeout
# Socket timeout of the client's side connections when the application's has none.
SIDE_TIMEOUT = 5.0


def _is_cluster(client: Any) -> bool:
    return type(client).__name__ == "RedisCluster" or hasattr(client, "get_node_from_key")


def _slot(key: str) -> int:
    return int(key_slot(key.encode()))


def _one_slot(key: str) -> int:
    return 0  # outside a cluster one script renews every key


# Default owner ids: a number per thread from one process-wide counter (thread idents are reused).
_numbers = itertools.count(1)
_thread = threading.local()


def _thread_number() -> int:
    number: int | None = getattr(_thread, "number", None)
    if number is None:
        number = _thread.number = next(_numbers)
    return number


def _io_timeout(lease_ms: int) -> float:
    """Socket timeout of the client's own connections (watchdog, clean-up): half a renewal
    interval, between 0.1 and 2 s, so a hung server cannot hold a renewal past the next one."""
    return min(2.0, max(0.1, lease_ms / 6000))


def _wait_reply(conn: Any, until: float | None) -> None:
    """Wait for a reply to start arriving until ``until`` (None: without limit). A reply already
    there is read even when the time has run out (the process may have been paused); no reply
    by then is an unknown outcome: TimeoutError, and the caller disconnects."""
    while True:
        left = None if until is None else max(0.0, until - time.monotonic())
        if wait_readable(conn, 60.0 if left is None else min(left, 60.0)):
            return
        if until is not None and time.monotonic() >= until:
            raise RedisTimeoutError("no reply in time: the outcome is unknown")


def _execute(client: Any, commands: list[Command], extra: float = 0.0, deadline: float | None = None) -> list[Any]:
    """Send ``commands`` pipelined on one pooled connection and read every reply.

    Error replies are returned in place (not raised), so the stream stays in step. ``extra``
    lengthens the wait for each reply beyond the connection's socket timeout (``math.inf``: no
    limit); ``deadline`` (monotonic) ends it. Any exception or interrupt between sending and
    reading the last reply disconnects the connection before it goes back to the pool, so no
    reply is ever left for the application to read (and a server-side wait ends with it).
    """
    pool = client.connection_pool
    conn: Any = None
    in_step = False
    try:
        conn = get_connection(pool)
        conn.send_packed_command(conn.pack_commands(resolve(commands) if extra else commands))
        until: float | None = None
        poll = False
        if extra or deadline is not None:
            base = conn.socket_timeout
            until = None if base is None or math.isinf(extra) else time.monotonic() + base + extra
            if deadline is not None:
                until = deadline if until is None else min(until, deadline)
            # A socket without timeout already waits as long as it takes: read directly.
            poll = until is not None or base is not None
        replies: list[Any] = []
        for _ in commands:
            if poll:
                _wait_reply(conn, until)
            try:
                replies.append(conn.read_response())
            except ResponseError as error:
                replies.append(error)
        in_step = True
        return replies
    finally:
        if conn is not None:
            if not in_step:
                conn.disconnect()
            pool.release(conn)


class _Watchdog:
    """One daemon thread per client: calls ``tick`` until stopped; ``tick`` says when next."""

    def __init__(self, tick: Callable[[], float]) -> None:
        self._tick = tick
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="redislock-watchdog", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        pause = 0.0
        while not self._stop.wait(pause):
            try:
                pause = self._tick()
            except Exception:  # a renewal error is retried on the next tick
                log.warning("lock renewal failed; retrying next tick", exc_info=True)
                pause = 0.1

    def stop(self, wait: float) -> None:
        self._stop.set()
        if self.thread is not threading.current_thread():
            self.thread.join(timeout=wait)


_engines: weakref.WeakSet[_Engine] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for engine in list(_engines):
        engine.forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _Engine:
    """Everything a LockClient does over the network. Holds no reference to the LockClient, so
    the watchdog thread (which holds the engine) does not keep the client alive.

    Three kinds of connections: the application's pool (acquires, reads), this client's
    *side* connections (releases, ``extend``, Lua-mode subscriptions, MultiLock components:
    what must not wait behind the application's pool or hang with it; the application's socket
    timeout or SIDE_TIMEOUT, no retries), and the watchdog's own (renewals and clean-ups, short
    timeouts)."""

    def __init__(self, redis: Any, mode: str, lease: int, max_hold: float | None = None) -> None:
        self.redis = redis
        self.cluster = _is_cluster(redis)
        self.lease_ms = lease
        self.max_hold = max_hold
        self.io_timeout = _io_timeout(lease)
        app_timeout = socket_timeout_of(redis)
        self.side_timeout = app_timeout or SIDE_TIMEOUT
        self.grace = reply_grace(app_timeout)
        self.id = str(uuid.uuid4())
        self.registry = Registry()
        self._mode: str | None = None if mode == "auto" else mode
        self._sem_mode: str | None = LUA if mode == LUA else None
        self._mutex = threading.Lock()
        self._watchdog: _Watchdog | None = None
        self._own: dict[str, Any] = {}
        self._scripts_loaded: set[int] = set()
        self.closed = False
        _engines.add(self)

    def forked(self) -> None:
        """In a forked child: a new client id, no holds, no watchdog (a new one starts with the
        first kept hold), no connections of the parent's."""
        self.id = str(uuid.uuid4())
        self.registry.reset()
        self._mutex = threading.Lock()
        self._watchdog = None
        self._own = {}
        self._scripts_loaded = set()

    # -- routing --------------------------------------------------------------------------
    def node(self, key: str | None) -> Any:
        """The plain client of the node serving ``key`` (the client itself outside a cluster)."""
        if not self.cluster:
            return self.redis
        node = self.redis.get_node_from_key(key) if key is not None else self.redis.get_default_node()
        return self.redis.get_redis_connection(node)

    def _pool_of(self, key: str) -> Any:
        return cluster_node_pool(self.redis, key) if self.cluster else self.redis.connection_pool

    def own(self, key: str, side: bool = False) -> Any:
        """This client's own connection pool to the node of ``key`` (never the application's
        pool): the watchdog's (short timeouts) or, with ``side``, the side connections."""
        if not self.cluster:  # one server: no routing to work out
            client = self._own.get("side" if side else "own")
            if client is not None:
                return client
        pool = self._pool_of(key)
        kwargs = pool.connection_kwargs
        name = "side" if side else "own"
        if self.cluster:
            name = f"{name}:{kwargs.get('host')}:{kwargs.get('port')}:{kwargs.get('path')}"
        with self._mutex:
            client = self._own.get(name)
            if client is None:
                client = self._own[name] = own_client(pool, self.side_timeout if side else self.io_timeout)
            return client

    def side(self, key: str) -> Any:
        return self.own(key, side=True)

    def mode(self, key: str | None = None, deadline: float | None = None) -> str:
        if self._mode is None:
            reply = _execute(self.node(key), [("COMMAND", "INFO", "lock.acquire")], 0.0, deadline)[0]
            self._mode = MODULE if module_loaded(raise_error(reply)) else LUA
        return self._mode

    def target(self, key: str, deadline: float | None = None, kind: str = PLAIN) -> Target:
        return Target(self.mode(key, deadline), key, self.cluster, kind)

    def sem_mode(self, key: str | None = None, deadline: float | None = None) -> str:
        """The semaphores' mode: ``module`` when the server has LOCK.SEMACQUIRE (a module
        without it, an older build, leaves them to the Lua scripts), else ``lua``."""
        if self._sem_mode is None:
            if self.mode(key, deadline) == LUA:
                self._sem_mode = LUA
            else:
                reply = _execute(self.node(key), [("COMMAND", "INFO", "lock.semacquire")], 0.0, deadline)[0]
                self._sem_mode = MODULE if module_loaded(raise_error(reply)) else LUA
        return self._sem_mode

    def sem_target(self, key: str, deadline: float | None = None) -> SemTarget:
        target = SemTarget(self.sem_mode(key, deadline), key, self.cluster)
        if self.cluster and target.mode == LUA:
            check_sem_cluster_name(key)
        return target

    def run(
        self, key: str, commands: list[Command], extra: float = 0.0, deadline: float | None = None, side: bool = False
    ) -> list[Any]:
        """Run pipelined commands on the node of ``key`` (the application's pool, or with
        ``side`` this client's side connections); load our scripts on NOSCRIPT and follow the
        cluster's slot changes (MOVED, ASK, TRYAGAIN) by asking for the slots again."""
        for attempt in range(MAX_REDIRECTS):
            client = self.side(key) if side else self.node(key)
            replies = self.run_on(client, commands, extra, deadline)
            if not (self.cluster and any(is_redirect(r) for r in replies)) or attempt == MAX_REDIRECTS - 1:
                return replies
            refresh_slots(self.redis)
            time.sleep(0.01 * attempt)
        raise AssertionError("unreachable")

    def run_on(
        self, client: Any, commands: list[Command], extra: float = 0.0, deadline: float | None = None
    ) -> list[Any]:
        if id(client) not in self._scripts_loaded and uses_scripts(commands):
            # Loaded up front, so a first EVALSHA never fails after a pipelined WAIT ran.
            _execute(client, load_script_commands(), 0.0, deadline)
            self._scripts_loaded.add(id(client))
        replies = _execute(client, commands, extra, deadline)
        if any(is_noscript(r) for r in replies):  # SCRIPT FLUSH, restart, failover
            _execute(client, load_script_commands(), 0.0, deadline)
            replies = _execute(client, commands, extra, deadline)
        return replies

    def call(self, key: str, *command: Any) -> Any:
        return raise_error(self.run(key, [command])[0])

    # -- the acquire algorithm's requests -------------------------------------------------
    def drive(
        self, flow: Generator[Request, Any, Acquired], deadline: float | None, side: bool, ticket: Ticket
    ) -> tuple[Acquired, float]:
        """Run the acquire flow; return its outcome and when its last command was sent. Past
        ``deadline`` (monotonic) no reply is waited for: TimeoutError (an unknown outcome)."""
        pubsub: Any = None
        sent = time.monotonic()
        try:
            reply: Any = None
            while True:
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
                    reply = self.run(request.key, request.commands, request.extra, deadline, side)
                elif isinstance(request, Listen):
                    pubsub = self._subscribe(request, deadline)
                    reply = None
                elif isinstance(request, Await):
                    reply = self._next_message(pubsub, _bounded(request.seconds, deadline))
                else:
                    time.sleep(_bounded(request.seconds, deadline))
                    reply = None
        finally:
            flow.close()
            if pubsub is not None:
                pubsub.close()

    def _subscribe(self, request: Listen, deadline: float | None) -> Any:
        """Subscribe on a side connection of this client (not the application's pool, so a
        waiter needs no second pooled connection for its attempts)."""
        pubsub = self.side(request.key).pubsub()
        try:
            if self.cluster and hasattr(pubsub, "ssubscribe"):
                pubsub.ssubscribe(request.channel)
            elif self.cluster:  # redis-py without sharded pub/sub in this client
                pubsub.execute_command("SSUBSCRIBE", request.channel)
            else:
                pubsub.subscribe(request.channel)
            until = time.monotonic() + SUBSCRIBE_TIMEOUT
            if deadline is not None:
                until = min(until, deadline)
            while (left := until - time.monotonic()) > 0:
                message = pubsub.get_message(timeout=left)
                if message is not None and message["type"] in ("subscribe", "ssubscribe"):
                    return pubsub
            raise RedisTimeoutError(f"no confirmation of the subscription to {request.channel}")
        except BaseException:
            pubsub.close()
            raise

    @staticmethod
    def _next_message(pubsub: Any, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            message = pubsub.get_message(timeout=left)
            if message is not None and message["type"] in ("message", "smessage"):
                return True
        return False

    # -- what an interrupted exchange may have left ---------------------------------------
    def reconcile(self, suspect: Suspect) -> bool:
        """Bring the server's count for the owner down to what the book holds, and the book
        down to what the server holds. False when it must wait (an acquire of that owner is on
        its way)."""
        if self._mode is None:
            return True
        key, owner = suspect.key, suspect.owner
        if suspect.kind == SEM:  # a permit's ids: released (what was not held is not counted)
            if self._sem_mode is None or time.monotonic() < suspect.after:
                return self._sem_mode is None
            command = SemTarget(self._sem_mode, key, self.cluster).release(suspect.ids)
            raise_error(self.run_on(self.own(key), [command])[0])
            return True
        if self.registry.busy(key, owner):
            return False
        own = self.own(key)
        count = raise_error(self.run_on(own, [("HGET", key, owner)])[0])
        count = 0 if count is None else int(count)
        keep = self.registry.count(key, owner)
        if count > keep:
            target = Target(self._mode, key, self.cluster, suspect.kind)
            for reply in self.run_on(own, reconcile_commands(target, owner, count - keep)):
                if reply is None:
                    break
                raise_error(reply)
        self.registry.set_count(key, owner, min(count, keep))
        return True

    def settle(
        self,
        key: str,
        owner: str,
        lease_s: float,
        error: BaseException | None = None,
        kind: str = PLAIN,
        ids: tuple[bytes, ...] = (),
    ) -> None:
        """After an acquire or release whose replies were not all read: release what the
        server granted beyond what the book holds. When the server cannot be asked now (it did
        not answer: ``error`` is a connection error or timeout), the watchdog retries until the
        lease has run out (then the grant has expired anyway). A semaphore's permit ids are
        released now and once more by the watchdog a moment later (in case the acquire, sent on
        a connection since closed, reached the server after the first release)."""
        suspect = Suspect(key, owner, time.monotonic() + lease_s + 1.0, kind, ids)
        done = False
        try:
            if not isinstance(error, (RedisConnectionError, RedisTimeoutError)):
                done = self.reconcile(suspect)
        except Exception as failure:
            log.info("could not check %r after an interrupted call now (%r); the watchdog retries", key, failure)
        finally:
            if kind == SEM:
                suspect, done = suspect._replace(after=time.monotonic() + SETTLE_AGAIN), False
            if not done:
                self.registry.suspect(suspect)
                self.ensure_watchdog()

    # -- watchdog -------------------------------------------------------------------------
    def ensure_watchdog(self) -> None:
        watchdog = self._watchdog
        if watchdog is not None and watchdog.thread.is_alive():
            return
        with self._mutex:
            if (self._watchdog is None or not self._watchdog.thread.is_alive()) and not self.closed:
                self._watchdog = _Watchdog(self.tick)

    def tick(self) -> float:
        """One watchdog round: renew the holds that are due, declare the holds past their local
        deadline lost, clean up after interrupted calls. Returns the pause until the next round."""
        period = self.lease_ms / 3000
        due, dropped = self.registry.take_due(time.monotonic(), period / 10)
        for hold, why in dropped:
            log.warning("lock %r of %r is no longer renewed: %s", hold.key, hold.owner, why)
        self.renew(due)
        self.expire()
        for suspect in self.registry.take_suspects():
            try:
                done = self.reconcile(suspect)
            except Exception:
                done = False
            if not done:
                self.registry.suspect(suspect)
        return _next_pause(self.registry, period)

    def renew(self, holds: list[Hold]) -> None:
        """Renew ``holds``, one pipeline per node, over this client's own connections."""
        if not holds or self._mode is None:
            return
        now = time.monotonic()
        by_node: dict[int, tuple[Any, list[tuple[Hold, int]]]] = {}
        for hold in holds:
            ms = hold.renewal_ms(now, self.lease_ms)
            if ms is None:  # max_hold reached: left to expire (then lost)
                self.registry.retry(hold, hold.expires)
                continue
            client = self.own(hold.key)
            by_node.setdefault(id(client), (client, []))[1].append((hold, ms))
        for client, group in by_node.values():
            batch = renew_batch(self._mode, self._sem_mode, self.cluster, group, _slot if self.cluster else _one_slot)
            leases = {id(h): ms for h, ms in group}
            sent = time.monotonic()
            try:
                replies = self.run_on(client, [command for command, _ in batch])
            except Exception:
                log.warning("lock renewal failed; retrying", exc_info=True)
                for hold, _ in group:
                    self.registry.retry(hold, sent + min(hold.lease / 3, 1.0))
                continue
            if self.cluster and any(is_redirect(r) for r in replies):
                refresh_slots(self.redis)
            for reply, (_, members) in zip(replies, batch):
                for hold, renewed in renew_outcomes(reply, members):
                    if renewed:
                        self.registry.renewed(hold, sent, leases[id(hold)] / 1000)
                    elif renewed is False and self.registry.lose(hold):
                        self.notify(hold)
                    elif renewed is None:
                        self.registry.retry(hold, sent + min(hold.lease / 3, 1.0))

    def expire(self) -> None:
        for hold in self.registry.expired(time.monotonic()):
            if self.registry.lose(hold):
                log.warning("lock %r lost: no renewal for a whole lease, or max_hold reached", hold.key)
                self.notify(hold)

    @staticmethod
    def notify(hold: Hold) -> None:
        try:
            hold.notify_lost()
        except Exception:
            log.exception("on_lost callback failed")

    def close(self) -> None:
        with self._mutex:
            self.closed = True
            watchdog, self._watchdog = self._watchdog, None
            own, self._own = list(self._own.values()), {}
        if watchdog is not None:
            watchdog._stop.set()
        for client in own:  # wakes a renewal blocked on a hung server
            client.connection_pool.disconnect()
        if watchdog is not None:
            watchdog.stop(1.5)


def _bounded(seconds: float, deadline: float | None) -> float:
    return seconds if deadline is None else min(seconds, max(0.0, deadline - time.monotonic()))


def _next_pause(registry: Registry, period: float) -> float:
    """Until the watchdog's next round: the next hold due (or past its local deadline), at
    most one renewal period, soon when clean-ups are waiting."""
    pause = period
    wake = registry.next_wake()
    if wake is not None:
        pause = min(pause, wake - time.monotonic())
    if registry.has_suspects():
        pause = min(pause, 0.2)
    return max(0.005, pause)


F = TypeVar("F", bound=Callable[..., Any])


def _synchronized(lock: Any, lease: float | None, coroutine: bool) -> Callable[[F], F]:
    """The decorator of ``locks.synchronized`` (sync functions) and of the asyncio client's
    (coroutine functions): each call runs inside ``with lock:`` / ``async with lock:``."""

    def decorate(fn: F) -> F:
        if not callable(fn):
            raise TypeError(f"synchronized decorates a function, not {type(fn).__name__}")
        if inspect.iscoroutinefunction(fn) != coroutine:
            raise TypeError(
                "redislock.LockClient.synchronized decorates plain functions; use redislock.asyncio's for"
                " coroutine functions"
                if not coroutine
                else "redislock.asyncio.LockClient.synchronized decorates coroutine functions (async def)"
            )
        if coroutine:

            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                if not await lock.acquire(lease=lease):
                    raise timed_out(lock.name, lock.timeout)
                try:
                    return await fn(*args, **kwargs)
                finally:
                    await lock.release()

            run_async.lock = lock  # type: ignore[attr-defined]
            return run_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            if not lock.acquire(lease=lease):
                raise timed_out(lock.name, lock.timeout)
            try:
                return fn(*args, **kwargs)
            finally:
                lock.release()

        run.lock = lock  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]

    return decorate


class LockClient:
    """Distributed locks on one Redis deployment (``redis.Redis`` or ``redis.cluster.RedisCluster``).

    ``lease`` (seconds) is the lease of locks acquired without an explicit one; the watchdog
    renews those every ``lease / 3`` until they are released, for at most ``max_hold`` seconds
    after their acquire when it is set. ``mode`` is ``"auto"`` (use the redis-lock module's
    LOCK.* commands when ``COMMAND INFO lock.acquire`` finds them, Lua scripts otherwise),
    ``"module"`` or ``"lua"``.
    """

    def __init__(self, redis: Any, lease: float = 30.0, mode: str = "auto", max_hold: float | None = None) -> None:
        if not isinstance(redis, (Redis, RedisCluster)):
            raise TypeError(
                f"LockClient needs a redis.Redis or redis.cluster.RedisCluster, not {type(redis).__name__}"
                " (use redislock.asyncio.LockClient for redis.asyncio clients)"
            )
        self._engine = _Engine(redis, check_mode(mode), lease_ms(lease), check_max_hold(max_hold))
        self.redis = redis
        self.lease = float(lease)
        self.max_hold = self._engine.max_hold
        self._finalizer = weakref.finalize(self, self._engine.close)

    @property
    def id(self) -> str:
        """This client's UUID (Redisson's client id); a forked child gets a new one."""
        return self._engine.id

    @property
    def mode(self) -> str:
        """``"module"`` or ``"lua"``; with ``mode="auto"`` detected at first use."""
        return self._engine.mode()

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
        """A lock object for ``name`` (nothing is sent until it is used). ``timeout`` is the
        default wait of ``acquire()`` and of ``with lock:`` (None: as long as it takes);
        ``max_hold`` caps the renewal of its holds (default: the client's ``max_hold``)."""
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
        """A read-write lock ``name`` (Redisson's RReadWriteLock layout): ``rw.read`` and
        ``rw.write`` are locks with the ``Lock`` API. The options are ``lock()``'s, for both
        sides; ``fenced=True`` gives the write side fencing tokens (the read side has none)."""
        return RWLock(self, name, owner, fenced, sync_replicas, sync_timeout, on_lost, timeout, max_hold)

    def semaphore(
        self,
        name: str | bytes,
        permits: int | None = None,
        timeout: float | None = None,
        on_lost: OnLost | None = None,
        max_hold: Any = DEFAULT,
    ) -> Semaphore:
        """A semaphore ``name`` with leased permits (Redisson's RPermitExpirableSemaphore layout).
        ``permits``: set them now if the semaphore does not exist yet (LOCK.SEMSET ... NX, or
        Redisson's trySetPermits); None sends nothing. ``timeout`` is the default wait of
        ``acquire``; ``on_lost`` and ``max_hold`` as for ``lock()``."""
        return Semaphore(self, name, permits, timeout, on_lost, max_hold)

    def synchronized(
        self, name: str | bytes, *, timeout: float | None = None, lease: float | None = None, **options: Any
    ) -> Callable[[F], F]:
        """A decorator: every call of the function runs holding the lock ``name``
        (``with locks.lock(name, timeout=timeout, **options):``, ``lease`` as ``acquire``'s);
        ``redislock.LockTimeout`` when ``timeout`` runs out. For plain functions; the asyncio
        client's decorates coroutine functions."""
        lock = self.lock(name, timeout=timeout, **options)
        if lease is not None:
            lease_ms(lease)
        return _synchronized(lock, lease, coroutine=False)

    def close(self) -> None:
        """Stop the watchdog thread (held locks are no longer renewed). Idempotent; returns
        within 2 s even when a server hangs."""
        self._finalizer()

    def __enter__(self) -> LockClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<redislock.LockClient id={self.id} lease={self.lease}>"


class Lock:
    """A reentrant distributed lock: Redisson's RLock, with a redis-py ``Lock``'s manners.

    The owner is ``<client id>:<thread number>`` at each call unless pinned with ``owner=``.
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
        """The owner id of the calling thread (or the pinned one)."""
        return self._pinned or f"{self.client.id}:{_thread_number()}"

    def _field(self, owner: str | None = None) -> str:
        """The owner's field in the lock's hash: the book's name for its holds."""
        return (owner or self.owner) + self._suffix

    def _holder(self) -> Alive | None:
        """What a default owner's hold lives with: the calling thread (pinned owners: nothing)."""
        return None if self._pinned else thread_alive(threading.current_thread())

    @property
    def _engine(self) -> _Engine:
        return self.client._engine

    def acquire(self, blocking: bool = True, timeout: Any = DEFAULT, lease: float | None = None) -> bool:
        """Take the lock; True when held, False when ``timeout`` (seconds) ran out.

        ``blocking=False``: one attempt. ``timeout``: by default the lock's ``timeout``.
        ``lease=None``: ``client.lease``, renewed by the watchdog until released; ``lease=s``: a
        fixed lease, no renewal. Reentrant acquires add a hold (and keep its fencing token).
        With a finite ``timeout`` the call returns by ``timeout`` + the reply grace (the
        application's socket timeout, 0.25-2 s): a server that has not answered by then raises
        ``redis.TimeoutError`` (whatever it may have granted is released).
        """
        if timeout is DEFAULT:
            timeout = self.timeout if blocking else None
        wait = check_timeout(timeout, blocking)
        if lease is not None:
            lease_ms(lease)
        return self._acquire_as(self.owner, blocking, wait, lease, holder=self._holder())

    def _acquire_as(
        self,
        owner: str,
        blocking: bool,
        wait: float | None,
        lease: float | None,
        deadline: float | None = None,
        side: bool = False,
        holder: Alive | None = None,
    ) -> bool:
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
                engine.ensure_watchdog()  # before a hold exists: starting a thread can be interrupted
            engine.registry.begin(ticket)
            deadline = hard_deadline(wait, self._sync_ms, self._replicas, engine.grace, deadline)
            target = engine.target(self.name, deadline, self._kind)
            if engine.cluster and target.mode == LUA:
                check_cluster_name(self.name, self.fenced, self._kind)
            plan = AcquirePlan(target, field, hold_ms, self.fenced, self._replicas, self._sync_ms, blocking, wait)
            waits = target.mode == MODULE and bool(blocking) and wait != 0
            got, sent = engine.drive(acquire_flow(plan), deadline, side, ticket)
            if not got.acquired:
                engine.registry.finish(ticket)
                return False
            # A granted WAIT started its lease when the reply left the server.
            start = time.monotonic() if waits else sent
            # Recording the hold is the last step: nothing between it and the caller.
            return engine.registry.record(
                ticket, lease is None, got.token, self.on_lost, self, hold_ms / 1000, start, holder, self.max_hold
            )
        except BaseException as error:
            # The hold this call may have recorded is taken off the book; what the server may
            # have granted beyond the book (a reply never read) is released.
            engine.registry.abort(ticket)
            if ticket.sent:
                engine.settle(self.name, field, hold_ms / 1000, error, self._kind)
            raise

    def release(self) -> None:
        """Give back one hold; the last one frees the lock. NotOwnedError if not held.

        Sent on a connection of the client's own (not the application's pool, so waiters
        cannot starve it). Interrupted (``KeyboardInterrupt``, an exception), it still gives the
        hold back: off the book at once, and on the server now or by the watchdog."""
        self._release_as(None)

    def _release_as(self, owner: str | None) -> None:
        try:  # first: an interrupt at any later point still gives the hold back
            ticket = None
            field = self._field(owner)
            engine = self._engine
            ticket = Ticket(self.name, field, self._kind)
            hold = engine.registry.begin_release(ticket)
            rearm = engine.lease_ms if hold is not None and hold.watch else 0
            command = engine.target(self.name, kind=self._kind).release(field, rearm)
            ticket.sent = True
            freed = parse_release(engine.run(self.name, [command], side=True)[0])
            # A read release replies 0 while other owners hold the lock, even when this owner's last
            # hold is gone: the book's count says whether it keeps one.
            engine.registry.end_release(ticket, None if self._kind == READ and not freed else not freed)
        except NotOwnedError:
            if ticket is not None:
                self._engine.registry.end_release(ticket, False)
            raise
        except BaseException as error:
            self._abandon_release(locals().get("ticket"), owner, error)
            raise

    def _abandon_release(self, ticket: Ticket | None, owner: str | None, error: BaseException) -> None:
        """A release that raised before its reply was read: one hold less on the book, then
        the server is brought to the book (release sent or not)."""
        engine = self._engine
        ticket = ticket or Ticket(self.name, self._field(owner), self._kind)
        if ticket.hold is None and not ticket.applied:
            ticket.hold = engine.registry.get(ticket.key, ticket.owner)
        # Only a hold the book knows is reconciled (the server's count for an owner this
        # client never recorded is not its to change).
        if engine.registry.end_release(ticket, None) or (ticket.sent and ticket.hold is not None):
            engine.settle(ticket.key, ticket.owner, engine.lease_ms / 1000, error, self._kind)

    def extend(self, additional_time: float, replace_ttl: bool = False) -> None:
        """As redis-py's ``Lock.extend``: add ``additional_time`` seconds to the lease left, or
        with ``replace_ttl=True`` set the lease left to it. NotOwnedError if this owner does
        not hold the lock. Meant for fixed-lease holds (kept holds stay renewed)."""
        ms = lease_ms(additional_time, "additional_time")
        engine = self._engine
        owner = self._field()
        target = engine.target(self.name, kind=self._kind)
        if not replace_ttl:
            pttl = int(raise_error(engine.run(self.name, [("PTTL", self.name)], side=True)[0]))
            ms = ms + pttl if pttl > 0 else ms
        sent = time.monotonic()
        if not parse_renew(engine.run(self.name, [target.renew(owner, ms)], side=True)[0]):
            hold = engine.registry.get(self.name, owner)
            if hold is not None:
                engine.registry.lose(hold)
            raise NotOwnedError("the lock is not held by this owner")
        hold = engine.registry.get(self.name, owner)
        if hold is not None and not hold.watch:
            hold.lease = ms / 1000
            hold.expires = sent + hold.lease

    def locked(self) -> bool:
        """Whether anyone holds the lock (EXISTS). A read-write lock's read side: whether it is
        read-locked (a writer's own read holds too); its write side: whether it is write-locked."""
        engine = self._engine
        return parse_locked(self._kind, engine.call(self.name, *engine.target(self.name, kind=self._kind).locked()))

    def owned(self) -> bool:
        """Whether this owner holds the lock (HEXISTS). False without asking the server when the
        watchdog declared the hold lost or its lease ran out locally."""
        owner = self._field()
        hold = self._engine.registry.get(self.name, owner)
        if hold is not None and (hold.lost or time.monotonic() >= hold.expires):
            return False
        return bool(self._engine.call(self.name, "HEXISTS", self.name, owner))

    def hold_count(self) -> int:
        """This owner's hold count, 0 if it holds none (HGET)."""
        count = self._engine.call(self.name, "HGET", self.name, self._field())
        return 0 if count is None else int(count)

    def ttl(self) -> float | None:
        """Seconds left on the lease, None when nobody holds the lock (PTTL; inf: no TTL)."""
        pttl = int(self._engine.call(self.name, "PTTL", self.name))
        if pttl == -2:
            return None
        return math.inf if pttl < 0 else pttl / 1000

    def force_release(self) -> bool:
        """Delete the lock whoever holds it and announce the release; True if there was one.
        A read-write lock's read side frees it only when it is read-locked, its write side only
        when it is write-locked (Redisson's forceUnlock); ``rwlock.force_release()`` either."""
        engine = self._engine
        if self._kind == PLAIN:
            engine.registry.drop_key(self.name)
        freed = bool(int(engine.call(self.name, *engine.target(self.name, kind=self._kind).force_release())))
        if freed:
            engine.registry.drop_key(self.name)
        return freed

    @property
    def token(self) -> int | None:
        """The fencing token of this owner's current hold (``fenced=True``), else None."""
        hold = self._engine.registry.get(self.name, self._field())
        return hold.token if hold is not None and not hold.lost else None

    def __enter__(self) -> Lock:
        if not self.acquire():
            raise timed_out(self.name, self.timeout)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<redislock.Lock name={self.name!r}>"


class ReadLock(Lock):
    """The read side of a read-write lock (Redisson's RReadLock): shared with other readers,
    excluded by a writer other than this owner (a writer may take read holds: downgrade).

    Each hold has its own timeout key, so a reader that dies stops counting when its lease runs
    out; the watchdog renews this owner's hold keys and the hash. ``token`` is always None."""

    _kind = READ

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fenced = False

    def __repr__(self) -> str:
        return f"<redislock.ReadLock name={self.name!r}>"


class WriteLock(Lock):
    """The write side of a read-write lock (Redisson's RWriteLock): exclusive, reentrant, held
    in the hash field ``<owner>:write``. An owner holding read locks cannot take it (no
    upgrade): a waiting acquire raises ``redislock.UpgradeError``, a non-blocking one returns
    False. ``fenced=True`` on ``rwlock()``: ``token`` is the hold's fencing token."""

    _kind = WRITE
    _suffix = WRITE_SUFFIX

    def __repr__(self) -> str:
        return f"<redislock.WriteLock name={self.name!r}>"


class RWLock:
    """A read-write lock: ``read`` and ``write`` share the hash ``name`` (Redisson's layout)."""

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

    def force_release(self) -> bool:
        """Free the lock whatever its mode (LOCK.FORCERELEASE, or Redisson's force unlocks);
        True if it was held."""
        engine = self.client._engine
        target = engine.target(self.name, kind=WRITE)
        replies = engine.run(self.name, target.force_release_any())
        freed = any(int(raise_error(reply)) == 1 for reply in replies)
        engine.registry.drop_key(self.name)
        return freed

    def __repr__(self) -> str:
        return f"<redislock.RWLock name={self.name!r}>"


class Semaphore:
    """A semaphore with leased permits (Redisson's RPermitExpirableSemaphore layout).

    ``acquire`` takes permits together (all or none) and returns a ``Permit`` holding their
    ids; permits are not tied to a thread (any thread may release a ``Permit``). In module
    mode waiting is the server's FIFO queue (LOCK.SEMACQUIRE ... WAIT), in lua mode Redisson's
    (pub/sub on ``redisson_sc:{name}``, retry). ``timeout`` is the default wait of
    ``acquire``; ``on_lost`` is called (with the ``Permit`` if it takes an argument) when the
    watchdog finds a renewed permit gone; ``max_hold`` caps the renewal as for locks.
    """

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
        total = None if permits is None else check_total(permits)
        self.timeout = check_timeout(timeout)
        self.on_lost = check_callback(on_lost)
        self.max_hold = client.max_hold if max_hold is DEFAULT else check_max_hold(max_hold)
        self.client = client
        if total is not None:
            self.try_set_permits(total)

    @property
    def _engine(self) -> _Engine:
        return self.client._engine

    @property
    def mode(self) -> str:
        """``"module"`` (LOCK.SEM* commands) or ``"lua"`` (our scripts): what this semaphore uses."""
        return self._engine.sem_mode(self.name)

    def _call(self, command_of: Callable[[SemTarget], Command], side: bool = False) -> Any:
        engine = self._engine
        target = engine.sem_target(self.name)
        return raise_error(engine.run(self.name, [command_of(target)], side=side)[0])

    def try_set_permits(self, permits: int) -> bool:
        """Set the permits only if the semaphore does not exist yet (Redisson's trySetPermits,
        LOCK.SEMSET ... NX); True if it was set (and the permits announced)."""
        total = check_total(permits)
        return parse_count(self._call(lambda t: t.try_set_permits(total))) == 1

    def set_permits(self, permits: int) -> None:
        """Make the total (available + held) ``permits``: the available count changes by the
        difference (it may go negative while more are held). Waiters are woken."""
        total = check_total(permits)
        self._call(lambda t: t.set_permits(total))

    def available(self) -> int:
        """The permits available now (expired permits counted back first)."""
        engine = self._engine
        target = engine.sem_target(self.name)
        return parse_available(target.mode, engine.run(self.name, [target.available()])[0])

    def info(self) -> dict[str, Any]:
        """LOCK.SEMINFO (module mode): ``available``, ``held``, ``waiters``, ... as a dict."""
        engine = self._engine
        if engine.sem_mode(self.name) != MODULE:
            raise RuntimeError("semaphore info needs the module's LOCK.SEMINFO (this semaphore is in lua mode)")
        return info_map(engine.call(self.name, "LOCK.SEMINFO", self.name))

    def acquire(self, permits: int = 1, timeout: Any = DEFAULT, lease: float | None = None) -> Permit:
        """Take ``permits`` permits together (all or none) and return them as a ``Permit``.

        ``timeout``: by default the semaphore's ``timeout`` (None: as long as it takes; 0: one
        attempt); when it runs out, ``redislock.LockTimeout``. ``lease=None``: ``client.lease``,
        renewed by the watchdog until released; ``lease=s``: a fixed lease, no renewal (the
        permits return on their own when it ends). As ``Lock.acquire``, a server that has not
        answered by ``timeout`` + the reply grace raises ``redis.TimeoutError`` (whatever it
        may have granted is released)."""
        if timeout is DEFAULT:
            timeout = self.timeout
        count, wait = check_acquire_permits(permits), check_timeout(timeout)
        if lease is not None:
            lease_ms(lease)
        return self._acquire(count, wait, lease, True)  # type: ignore[return-value]

    def try_acquire(self, permits: int = 1, timeout: float | None = 0.0, lease: float | None = None) -> Permit | None:
        """As ``acquire``, but None when ``timeout`` runs out (by default one attempt, no wait)."""
        count, wait = check_acquire_permits(permits), check_timeout(timeout)
        if lease is not None:
            lease_ms(lease)
        return self._acquire(count, wait, lease)

    def _acquire(self, count: int, wait: float | None, lease: float | None, or_raise: bool = False) -> Permit | None:
        """Take the permits; None (``or_raise``: LockTimeout) when ``wait`` ran out. Booking the
        permit is the last step: nothing between it and the caller."""
        engine = self._engine
        hold_ms = hold_lease_ms(lease, engine.lease_ms, self.max_hold)
        if engine.closed:
            raise RuntimeError("the LockClient is closed")
        ids = new_ids(count)
        ticket = Ticket(self.name, permit_owner(ids), SEM)
        hold: Hold | None = None
        try:
            if lease is None:
                engine.ensure_watchdog()  # before a permit exists: starting a thread can be interrupted
            deadline = hard_deadline(wait, 0, 0, engine.grace, None)
            target = engine.sem_target(self.name, deadline)
            plan = SemAcquirePlan(target, ids, hold_ms, True, wait)
            got, sent = engine.drive(sem_acquire_flow(plan), deadline, False, ticket)
            if not got.acquired:
                if or_raise:
                    raise timed_out_permits(self.name, count, wait)
                return None
            # A granted WAIT started its lease when the reply left the server.
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
            # Nothing may stay held that the client does not track: the ids it generated are
            # given back (now, and once more a moment later).
            if hold is not None:
                engine.registry.remove(hold)
            if ticket.sent:
                engine.settle(self.name, ticket.owner, hold_ms / 1000, error, SEM, tuple(ids))
            raise

    def release(self, permit: Permit) -> None:
        """``permit.release()``: give its permits back (NotOwnedError if already released, or
        if any of them had expired or was lost; those still held are given back anyway)."""
        if not isinstance(permit, Permit) or permit.name != self.name or permit.client is not self.client:
            raise ValueError(f"{permit!r} is not a permit of {self!r}")
        permit.release()

    def __repr__(self) -> str:
        return f"<redislock.Semaphore name={self.name!r}>"


class Permit:
    """Permits taken together by one ``Semaphore.acquire``: ``ids`` (16 random bytes each, the
    zset members), ``lease`` (seconds of a fixed lease; None: renewed by the watchdog).

    Released exactly once (``release()``, ``semaphore.release(permit)`` or leaving ``with``); a
    second release raises ``NotOwnedError``, as a lock's. Any thread may release it."""

    def __init__(self, semaphore: Semaphore, ids: list[bytes], lease: float | None) -> None:
        self.semaphore = semaphore
        self.client = semaphore.client
        self.name = semaphore.name
        self.ids: list[bytes] = list(ids)
        self.lease = None if lease is None else lease_ms(lease) / 1000
        self._hold: Hold | None = None
        self._once = threading.Lock()  # taken by the one release (never given back)

    @property
    def released(self) -> bool:
        return self._once.locked()

    def _gone(self) -> bool:
        """Released, lost, or past its local deadline (no round trip)."""
        hold = self._hold
        return self._once.locked() or hold is None or hold.lost or time.monotonic() >= hold.expires

    def owned(self) -> bool:
        """Whether every permit is still held: False without a round trip once released, lost
        or past its lease locally; else every id is in the zset and not past its lease."""
        if self._gone():
            return False
        engine = self.client._engine
        return still_held(engine.call(self.name, *engine.sem_target(self.name).scores(self.ids)))

    held = owned

    def release(self) -> None:
        """Give the permits back (waiters are granted or woken). NotOwnedError when released
        before, or when some had expired or were lost (those still held are given back).

        Sent on a connection of the client's own. Interrupted, it still gives them back: the
        permit counts as released at once, and the ids are released now or by the watchdog."""
        try:  # first: an interrupt at any later point still gives the permits back
            if not self._once.acquire(blocking=False):
                raise NotOwnedError(f"this permit of {self.name!r} was already released")
            engine = self.client._engine
            hold = self._hold
            lost = hold is not None and (hold.lost or (hold.watch and time.monotonic() >= hold.expires))
            if hold is not None:
                engine.registry.remove(hold)
            command = engine.sem_target(self.name).release(self.ids)
            returned = parse_count(engine.run(self.name, [command], side=True)[0])
        except NotOwnedError:
            raise
        except BaseException as error:
            self._abandon(error)
            raise
        if lost or returned < len(self.ids):
            raise NotOwnedError(
                f"{len(self.ids) - returned} of the {len(self.ids)} permits of {self.name!r} had expired or were"
                " lost (the others were given back)"
                if returned < len(self.ids)
                else f"the permits of {self.name!r} were lost (no renewal for a whole lease)"
            )

    def _abandon(self, error: BaseException) -> None:
        """A release that raised before its reply was read: the permit counts as released, and
        its ids are given back (now, or by the watchdog when the server cannot be asked)."""
        self._once.acquire(blocking=False)
        engine = self.client._engine
        if self._hold is not None:
            engine.registry.remove(self._hold)
        if not isinstance(error, ResponseError):  # a reply read: the server changed nothing
            engine.settle(
                self.name, permit_owner(self.ids), held_for(self._hold, engine.lease_ms), error, SEM, tuple(self.ids)
            )

    def renew(self, lease: float | None = None) -> None:
        """Reset the lease of every permit to ``lease`` seconds from now (None: the permit's
        own lease, or ``client.lease`` when the watchdog keeps it). NotOwnedError (and the
        permit is lost) when any of them is no longer held."""
        engine = self.client._engine
        hold = self._hold
        if lease is not None:
            ms = lease_ms(lease)
        else:
            ms = lease_ms(self.lease) if self.lease is not None else engine.lease_ms
        if self._gone() or hold is None:
            raise NotOwnedError(f"this permit of {self.name!r} is no longer held")
        sent = time.monotonic()
        renewed = parse_count(engine.run(self.name, [engine.sem_target(self.name).renew(self.ids, ms)], side=True)[0])
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

    def extend(self, lease: float) -> None:
        """Set the lease left of every permit to ``lease`` seconds (``renew(lease)``)."""
        lease_ms(lease)
        self.renew(lease)

    def __enter__(self) -> Permit:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<redislock.Permit of {self.name!r}: {len(self.ids)} permit(s)>"


class _Attempt:
    """One parallel attempt of a MultiLock: component outcomes as they come, and after the
    decision, components that answer late give back what they took."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.outcomes: dict[int, Any] = {}
        self.decided = False

    def run(
        self,
        i: int,
        lock: Lock,
        owner: str,
        blocking: bool,
        each: float,
        lease: float | None,
        until: float,
        holder: Alive | None,
    ) -> None:
        outcome: Any
        try:
            # On the component client's side connections: a hung server blocks this thread
            # (bounded by their socket timeout), never a connection of the application's pool.
            outcome = lock._acquire_as(owner, blocking, each, lease, until, side=True, holder=holder)
        except Exception as error:
            log.info("a component lock failed: %r", error)
            outcome = error
        with self.cond:
            if not self.decided:
                self.outcomes[i] = outcome
                self.cond.notify_all()
                return
        if outcome is True:  # too late for the decision
            _release_quietly(lock, owner)


class MultiLock:
    """Several locks (normally on independent servers) taken together: every one, or none.

    The components are tried in parallel, each with the time left; the attempt is decided as
    soon as its outcome is known (a hung server does not hold it up). On failure or interrupt
    every component taken in the attempt is given back. ``timeout`` is the default wait of
    ``acquire()`` and of ``with``.
    """

    _majority = False

    def __init__(self, locks: Iterable[Lock], timeout: float | None = None) -> None:
        self.locks: list[Lock] = check_locks(locks, Lock)
        self.timeout = check_timeout(timeout)
        self.validity: float | None = None
        self._held: dict[tuple[str, ...], list[list[int]]] = {}
        self._mutex = threading.Lock()

    def _owners(self) -> tuple[str, ...]:
        return tuple(lock.owner for lock in self.locks)

    def acquire(self, blocking: bool = True, timeout: Any = DEFAULT, lease: float | None = None) -> bool:
        if timeout is DEFAULT:
            timeout = self.timeout if blocking else None
        wait = check_timeout(timeout, blocking)
        lease_s = self.locks[0].client.lease if lease is None else lease_ms(lease) / 1000
        owners = self._owners()
        holder = thread_alive(threading.current_thread())
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
            taken = self._attempt(owners, each, lease, until, need, holder)
            if taken is not None:
                validity = redlock_validity(lease_s, time.monotonic() - started)
                if not self._majority or validity > 0:
                    with self._mutex:
                        self._held.setdefault(owners, []).append(taken)
                    self.validity = validity if self._majority else None
                    return True
                self._give_back(taken, owners)
            left = None if deadline is None else deadline - time.monotonic()
            if not blocking or (left is not None and left <= 0):
                return False
            pause = random.uniform(0.005, 0.05)
            time.sleep(pause if left is None else min(pause, left))

    def _attempt(
        self, owners: tuple[str, ...], each: float, lease: float | None, until: float, need: int, holder: Alive
    ) -> list[int] | None:
        """Components taken when at least ``need`` were, else None (and nothing is held)."""
        attempt = _Attempt()
        count = len(self.locks)
        for i, (lock, owner) in enumerate(zip(self.locks, owners)):
            worker = threading.Thread(
                target=attempt.run,
                args=(i, lock, owner, each > 0, each, lease, until, None if lock._pinned else holder),
                name="redislock-multi",
                daemon=True,
            )
            worker.start()
        taken: list[int] = []
        success = interrupted = False
        try:
            with attempt.cond:
                while True:
                    taken = sorted(i for i, ok in attempt.outcomes.items() if ok is True)
                    failed = len(attempt.outcomes) - len(taken)
                    left = until - time.monotonic()
                    if len(taken) >= need:
                        success = True
                        break
                    if failed > count - need or left <= 0:
                        break
                    attempt.cond.wait(left)
                attempt.decided = success
        except BaseException:
            interrupted = True
            raise
        finally:
            if not success:
                # Failure, or an interrupt (KeyboardInterrupt) while waiting: give back every
                # component taken so far, after a short wait (not when interrupted) for those
                # about to answer; any later give themselves back.
                settle = min(until, time.monotonic() + COMPONENT_GRACE)
                with attempt.cond:
                    while not interrupted and len(attempt.outcomes) < count and (left := settle - time.monotonic()) > 0:
                        attempt.cond.wait(left)
                    attempt.decided = True
                    taken = sorted(i for i, ok in attempt.outcomes.items() if ok is True)
                self._give_back(taken, owners)
        return taken if success else None

    def _give_back(self, taken: list[int], owners: tuple[str, ...]) -> None:
        workers = [
            threading.Thread(target=_release_quietly, args=(self.locks[i], owners[i]), daemon=True) for i in taken
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=5.0)

    def release(self) -> None:
        """Release every component taken; continue past errors and raise the first after the last."""
        owners = self._owners()
        with self._mutex:
            stack = self._held.get(owners)
            if not stack:
                raise NotOwnedError("this MultiLock is not held by this owner")
            taken = stack.pop()
            if not stack:
                del self._held[owners]
        errors: list[BaseException] = []
        for i in taken:
            try:
                self.locks[i]._release_as(owners[i])
            except Exception as error:
                log.warning("releasing component %d of %r failed: %r", i, self, error)
                errors.append(error)
        if errors:
            raise errors[0]

    def __enter__(self) -> MultiLock:
        if not self.acquire():
            raise LockTimeout(f"could not acquire {self!r} within {self.timeout} s")
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<redislock.{type(self).__name__} of {len(self.locks)} locks>"


class RedLock(MultiLock):
    """Redlock: held when a majority (``n // 2 + 1``) of the locks is taken and the validity
    left (``lease - elapsed - drift``, drift = 1% of the lease + 2 ms) is positive; ``validity``
    holds that time after a successful acquire."""

    _majority = True


def _release_quietly(lock: Lock, owner: str) -> None:
    try:
        lock._release_as(owner)
    except Exception as error:
        log.info("giving back %r failed: %r", lock, error)


__all__ = ["Lock", "LockClient", "MultiLock", "Permit", "RWLock", "ReadLock", "RedLock", "Semaphore", "WriteLock"]
