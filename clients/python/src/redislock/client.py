"""The blocking client: ``LockClient``, ``Lock``, ``MultiLock`` and ``RedLock``."""

from __future__ import annotations

import logging
import math
import random
import threading
import time
import uuid
import weakref
from collections.abc import Generator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

from redis.crc import key_slot
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ._core import (
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
from ._errors import NotOwnedError

log = logging.getLogger("redislock")

OnLost = Callable[..., Any]
MAX_REDIRECTS = 5
SUBSCRIBE_TIMEOUT = 7.5  # as Redisson's subscriptionTimeout


def _is_cluster(client: Any) -> bool:
    return type(client).__name__ == "RedisCluster" or hasattr(client, "get_node_from_key")


def _slot(key: str) -> int:
    return int(key_slot(key.encode()))


def _one_slot(key: str) -> int:
    return 0  # outside a cluster one script renews every key


def _get_connection(pool: Any) -> Any:
    try:
        return pool.get_connection()
    except TypeError:  # redis-py < 5.3 wants a command name
        return pool.get_connection("_")


def _execute(client: Any, commands: list[Command], extra: float) -> list[Any]:
    """Send ``commands`` pipelined on one pooled connection and read every reply.

    Error replies are returned in place (not raised), so the stream stays in step. ``extra``
    lengthens the read timeout beyond the connection's socket timeout (``math.inf``: no limit).
    An exception while reading (timeout, interrupt) drops the connection, and with it any
    server-side wait.
    """
    pool = client.connection_pool
    conn = _get_connection(pool)
    try:
        conn.send_packed_command(conn.pack_commands(commands))
        base = conn.socket_timeout
        if extra and conn._sock is not None:
            conn._sock.settimeout(None if base is None or math.isinf(extra) else base + extra)
        replies: list[Any] = []
        try:
            for _ in commands:
                try:
                    replies.append(conn.read_response())
                except ResponseError as error:
                    replies.append(error)
        finally:
            if extra and conn._sock is not None:
                conn._sock.settimeout(base)
        return replies
    finally:
        pool.release(conn)


class _Watchdog:
    """One daemon thread per client: calls ``tick`` every ``period`` seconds until stopped."""

    def __init__(self, tick: Callable[[], None], period: float) -> None:
        self._tick = tick
        self._period = period
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="redislock-watchdog", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._period):
            try:
                self._tick()
            except Exception:  # a renewal error is retried on the next tick
                log.warning("lock renewal failed; retrying next tick", exc_info=True)

    def stop(self) -> None:
        self._stop.set()
        if self.thread is not threading.current_thread():
            self.thread.join(timeout=10)


class _Engine:
    """Everything a LockClient does over the network. Holds no reference to the LockClient, so
    the watchdog thread (which holds the engine) does not keep the client alive."""

    def __init__(self, redis: Any, mode: str, lease: int) -> None:
        self.redis = redis
        self.cluster = _is_cluster(redis)
        self.lease_ms = lease
        self.registry = Registry()
        self._mode: str | None = None if mode == "auto" else mode
        self._mutex = threading.Lock()
        self._watchdog: _Watchdog | None = None
        self._scripts_loaded: set[int] = set()
        self.closed = False

    # -- routing --------------------------------------------------------------------------
    def node(self, key: str | None) -> Any:
        """The plain client of the node serving ``key`` (the client itself outside a cluster)."""
        if not self.cluster:
            return self.redis
        node = self.redis.get_node_from_key(key) if key is not None else self.redis.get_default_node()
        return self.redis.get_redis_connection(node)

    def mode(self, key: str | None = None) -> str:
        if self._mode is None:
            reply = _execute(self.node(key), [("COMMAND", "INFO", "lock.acquire")], 0.0)[0]
            with self._mutex:
                self._mode = MODULE if module_loaded(raise_error(reply)) else LUA
        return self._mode

    def target(self, key: str) -> Target:
        return Target(self.mode(key), key, self.cluster)

    def run(self, key: str, commands: list[Command], extra: float = 0.0) -> list[Any]:
        """Run pipelined commands on the node of ``key``; load our scripts on NOSCRIPT and follow
        the cluster's slot changes (MOVED, ASK, TRYAGAIN) by asking for the slots again."""
        for attempt in range(MAX_REDIRECTS):
            replies = self.run_on(self.node(key), commands, extra)
            if not (self.cluster and any(is_redirect(r) for r in replies)) or attempt == MAX_REDIRECTS - 1:
                return replies
            self.redis.nodes_manager.initialize()
            time.sleep(0.01 * attempt)
        raise AssertionError("unreachable")

    def run_on(self, client: Any, commands: list[Command], extra: float = 0.0) -> list[Any]:
        if id(client) not in self._scripts_loaded and uses_scripts(commands):
            # Loaded up front, so a first EVALSHA never fails after a pipelined WAIT ran.
            _execute(client, load_script_commands(), 0.0)
            self._scripts_loaded.add(id(client))
        replies = _execute(client, commands, extra)
        if any(is_noscript(r) for r in replies):  # SCRIPT FLUSH, restart, failover
            _execute(client, load_script_commands(), 0.0)
            replies = _execute(client, commands, extra)
        return replies

    def call(self, key: str, *command: Any) -> Any:
        return raise_error(self.run(key, [command])[0])

    # -- the acquire algorithm's requests -------------------------------------------------
    def drive(self, flow: Generator[Request, Any, Acquired]) -> Acquired:
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
                    reply = self.run(request.key, request.commands, request.extra)
                elif isinstance(request, Listen):
                    pubsub = self._subscribe(request)
                    reply = None
                else:
                    reply = self._next_message(pubsub, request.seconds)
        finally:
            flow.close()
            if pubsub is not None:
                pubsub.close()

    def _subscribe(self, request: Listen) -> Any:
        pubsub = self.node(request.key).pubsub()
        try:
            if self.cluster and hasattr(pubsub, "ssubscribe"):
                pubsub.ssubscribe(request.channel)
            elif self.cluster:  # redis-py without sharded pub/sub in this client
                pubsub.execute_command("SSUBSCRIBE", request.channel)
            else:
                pubsub.subscribe(request.channel)
            deadline = time.monotonic() + SUBSCRIBE_TIMEOUT
            while (left := deadline - time.monotonic()) > 0:
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

    # -- watchdog -------------------------------------------------------------------------
    def ensure_watchdog(self) -> None:
        with self._mutex:
            if self._watchdog is None and not self.closed:
                self._watchdog = _Watchdog(self.renew, self.lease_ms / 3000)

    def renew(self) -> None:
        """One watchdog tick: renew every kept hold, one pipeline per node."""
        holds = self.registry.watched()
        if not holds:
            return
        by_node: dict[int, tuple[Any, list[Any]]] = {}
        for hold in holds:
            client = self.node(hold.key)
            by_node.setdefault(id(client), (client, []))[1].append(hold)
        for client, group in by_node.values():
            batch = renew_commands(self.mode(group[0].key), group, self.lease_ms, _slot if self.cluster else _one_slot)
            try:
                replies = self.run_on(client, [command for command, _ in batch])
            except Exception:
                log.warning("lock renewal failed; retrying next tick", exc_info=True)
                continue
            if self.cluster and any(is_redirect(r) for r in replies):
                self.redis.nodes_manager.initialize()
            for reply, (_, members) in zip(replies, batch):
                for hold, renewed in renew_results(reply, members):
                    if renewed is False and self.registry.lose(hold):
                        try:
                            hold.notify_lost()
                        except Exception:
                            log.exception("on_lost callback failed")

    def close(self) -> None:
        with self._mutex:
            self.closed = True
            watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None:
            watchdog.stop()


class LockClient:
    """Distributed locks on one Redis deployment (``redis.Redis`` or ``redis.cluster.RedisCluster``).

    ``lease`` (seconds) is the lease of locks acquired without an explicit one; the watchdog
    renews those every ``lease / 3`` until they are released. ``mode`` is ``"auto"`` (use the
    redis-lock module's LOCK.* commands when ``COMMAND INFO lock.acquire`` finds them, Lua
    scripts otherwise), ``"module"`` or ``"lua"``.
    """

    def __init__(self, redis: Any, lease: float = 30.0, mode: str = "auto") -> None:
        self._engine = _Engine(redis, check_mode(mode), lease_ms(lease))
        self.redis = redis
        self.lease = float(lease)
        self.id = str(uuid.uuid4())
        self._finalizer = weakref.finalize(self, self._engine.close)

    @property
    def mode(self) -> str:
        """``"module"`` or ``"lua"``; with ``mode="auto"`` detected at first use."""
        return self._engine.mode()

    def lock(
        self,
        name: str,
        owner: str | None = None,
        fenced: bool = False,
        sync_replicas: int = 0,
        sync_timeout: float = 1.0,
        on_lost: OnLost | None = None,
    ) -> Lock:
        """A lock object for ``name`` (nothing is sent until it is used)."""
        return Lock(self, name, owner, fenced, sync_replicas, sync_timeout, on_lost)

    def close(self) -> None:
        """Stop the watchdog thread (held locks are no longer renewed). Idempotent."""
        self._finalizer()

    def __enter__(self) -> LockClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<redislock.LockClient id={self.id} lease={self.lease}>"


class Lock:
    """A reentrant distributed lock: Redisson's RLock, with a redis-py ``Lock``'s manners.

    The owner is ``<client id>:<thread id>`` at each call unless pinned with ``owner=``.
    """

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
        """The owner id of the calling thread (or the pinned one)."""
        return self._pinned or f"{self.client.id}:{threading.get_ident()}"

    @property
    def _engine(self) -> _Engine:
        return self.client._engine

    def acquire(self, blocking: bool = True, timeout: float | None = None, lease: float | None = None) -> bool:
        """Take the lock; True when held, False when ``timeout`` (seconds) ran out.

        ``blocking=False``: one attempt. ``lease=None``: ``client.lease``, renewed by the watchdog
        until released; ``lease=s``: a fixed lease, no renewal. Reentrant acquires add a hold.
        """
        check_timeout(timeout, blocking)
        return self._acquire_as(self.owner, blocking, timeout, lease)

    def _acquire_as(self, owner: str, blocking: bool, timeout: float | None, lease: float | None) -> bool:
        wait = check_timeout(timeout)
        engine = self._engine
        hold_ms = engine.lease_ms if lease is None else lease_ms(lease)
        if engine.closed:
            raise RuntimeError("the LockClient is closed")
        plan = AcquirePlan(
            engine.target(self.name), owner, hold_ms, self.fenced, self._replicas, self._sync_ms, bool(blocking), wait
        )
        got = engine.drive(acquire_flow(plan))
        if got.acquired and engine.registry.acquired(self.name, owner, lease is None, got.token, self.on_lost, self):
            engine.ensure_watchdog()
        return got.acquired

    def release(self) -> None:
        """Give back one hold; the last one frees the lock. NotOwnedError if not held."""
        self._release_as(self.owner)

    def _release_as(self, owner: str) -> None:
        engine = self._engine
        hold = engine.registry.begin_release(self.name, owner)
        rearm = engine.lease_ms if hold is not None and hold.watch else 0
        still_held = hold is not None and not hold.closing
        try:
            still_held = not parse_release(engine.run(self.name, [engine.target(self.name).release(owner, rearm)])[0])
        except NotOwnedError:
            still_held = False
            raise
        finally:
            engine.registry.end_release(hold, still_held)

    def locked(self) -> bool:
        """Whether anyone holds the lock (EXISTS)."""
        return bool(self._engine.call(self.name, "EXISTS", self.name))

    def owned(self) -> bool:
        """Whether this owner holds the lock (HEXISTS)."""
        return bool(self._engine.call(self.name, "HEXISTS", self.name, self.owner))

    def hold_count(self) -> int:
        """This owner's hold count, 0 if it holds none (HGET)."""
        count = self._engine.call(self.name, "HGET", self.name, self.owner)
        return 0 if count is None else int(count)

    def ttl(self) -> float | None:
        """Seconds left on the lease, None when nobody holds the lock (PTTL; inf: no TTL)."""
        pttl = int(self._engine.call(self.name, "PTTL", self.name))
        if pttl == -2:
            return None
        return math.inf if pttl < 0 else pttl / 1000

    def force_release(self) -> bool:
        """Delete the lock whoever holds it and announce the release; True if there was one."""
        engine = self._engine
        engine.registry.drop_key(self.name)
        return bool(int(engine.call(self.name, *engine.target(self.name).force_release())))

    @property
    def token(self) -> int | None:
        """The fencing token of this owner's current hold (``fenced=True``), else None."""
        hold = self._engine.registry.get(self.name, self.owner)
        return hold.token if hold is not None and not hold.lost else None

    def __enter__(self) -> Lock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<redislock.Lock name={self.name!r}>"


class MultiLock:
    """Several locks (normally on independent servers) taken together: every one, or none.

    The components are tried in parallel; on failure every component taken in the attempt is
    given back before retrying or returning False.
    """

    _majority = False

    def __init__(self, locks: Sequence[Lock]) -> None:
        if not locks:
            raise ValueError("a MultiLock needs at least one lock")
        self.locks = list(locks)
        self.validity: float | None = None
        self._held: dict[tuple[str, ...], list[list[int]]] = {}
        self._mutex = threading.Lock()

    def _owners(self) -> tuple[str, ...]:
        return tuple(lock.owner for lock in self.locks)

    def acquire(self, blocking: bool = True, timeout: float | None = None, lease: float | None = None) -> bool:
        wait = check_timeout(timeout, blocking)
        lease_s = self.locks[0].client.lease if lease is None else lease_ms(lease) / 1000
        owners = self._owners()
        count = len(self.locks)
        deadline = None if wait is None else time.monotonic() + wait
        with ThreadPoolExecutor(max_workers=count, thread_name_prefix="redislock-multi") as pool:
            while True:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                each = attempt_wait(remaining, count, self._majority) if blocking else 0.0
                started = time.monotonic()
                futures = [
                    pool.submit(lock._acquire_as, owner, each > 0, each, lease)
                    for lock, owner in zip(self.locks, owners)
                ]
                outcomes = [_outcome(f) for f in futures]
                taken = [i for i, ok in enumerate(outcomes) if ok is True]
                validity = redlock_validity(lease_s, time.monotonic() - started)
                if len(taken) >= quorum(count, self._majority) and (not self._majority or validity > 0):
                    with self._mutex:
                        self._held.setdefault(owners, []).append(taken)
                    self.validity = validity if self._majority else None
                    return True
                # Give back what this attempt took (and what a timed-out call may have taken).
                unsure = [i for i, ok in enumerate(outcomes) if isinstance(ok, RedisTimeoutError)]
                list(pool.map(lambda i: _release_quietly(self.locks[i], owners[i]), taken + unsure))
                left = None if deadline is None else deadline - time.monotonic()
                if not blocking or (left is not None and left <= 0):
                    return False
                pause = random.uniform(0.005, 0.05)
                time.sleep(pause if left is None else min(pause, left))

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
        self.acquire()
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


def _outcome(future: Future[bool]) -> Any:
    error = future.exception()
    if error is not None:
        log.info("a component lock failed: %r", error)
        return error
    return future.result()


def _release_quietly(lock: Lock, owner: str) -> None:
    try:
        lock._release_as(owner)
    except Exception as error:
        log.info("giving back %r failed: %r", lock, error)


__all__ = ["Lock", "LockClient", "MultiLock", "RedLock"]
