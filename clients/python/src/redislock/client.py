"""The synchronous client: ``LockClient``, ``Lock`` and the watchdog thread."""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
import uuid
import weakref
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Callable, Optional, Union

import redis
import redis.exceptions
from redis.client import Pipeline
from redis.commands.core import Script

from . import _core
from ._core import Attempt
from ._errors import LockError, NotOwnedError, ReplicaSyncError

log = logging.getLogger("redislock")

LostCallback = Callable[["Lock"], Any]

try:  # RedisCluster is optional at run time (present in redis-py >= 4.1)
    from redis.cluster import RedisCluster
except ImportError:  # pragma: no cover
    RedisCluster = None  # type: ignore[assignment,misc]

_SCRIPTS = {
    "acquire": _core.ACQUIRE_LUA,
    "fenced": _core.FENCED_ACQUIRE_LUA,
    "unlock": _core.UNLOCK_LUA,
    "renew": _core.RENEW_LUA,
    "force": _core.FORCE_UNLOCK_LUA,
}


class LockClient:
    """Makes locks on one Redis server (or cluster) and renews their leases.

    ``mode``: ``"auto"`` (detect the redis-lock module at first use with
    ``COMMAND INFO lock.acquire``), ``"module"`` or ``"lua"``.
    ``lease``: seconds; the lease of locks acquired without one, renewed by the watchdog every
    ``lease / 3`` until release (Redisson's lockWatchdogTimeout, default 30 s there too).
    """

    def __init__(self, redis_client: Any, lease: float = 30.0, mode: str = "auto") -> None:
        self._lease_ms = _core.lease_ms(lease)
        self.lease = self._lease_ms / 1000.0
        self._requested = _core.check_mode(mode)
        self._mode: Optional[str] = None if self._requested == "auto" else self._requested
        self.redis = redis_client
        self.id = str(uuid.uuid4())
        self._cluster = RedisCluster is not None and isinstance(redis_client, RedisCluster)
        self._scripts: dict[str, Script] = {}
        self._mutex = threading.Lock()
        self._watchdog = _Watchdog(self)

    # ---- introspection -------------------------------------------------------------------

    @property
    def mode(self) -> str:
        """``"module"`` or ``"lua"``: what ``"auto"`` detected (or what was asked for)."""
        if self._mode is None:
            node = self.redis.get_random_node().redis_connection if self._cluster else self.redis
            # Read raw: redis-py's COMMAND reply parser cannot take the [nil] of an unknown command.
            info = _send_on_one_connection(node, [["COMMAND", "INFO", "lock.acquire"]], None)[0]
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

    def close(self) -> None:
        """Stop the watchdog thread (held locks then expire at the end of their lease)."""
        self._watchdog.stop()

    def __enter__(self) -> LockClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self._watchdog.stop()

    # ---- internals -----------------------------------------------------------------------

    def _script(self, kind: str) -> Script:
        with self._mutex:
            s = self._scripts.get(kind)
            if s is None:
                s = self.redis.register_script(_SCRIPTS[kind])
                self._scripts[kind] = s
            return s

    def _node(self, name: str) -> redis.Redis:
        """The client of the node serving ``name`` (the client itself outside a cluster)."""
        if self._cluster:
            node = self.redis.get_node_from_key(name)
            conn = node.redis_connection or self.redis.get_redis_connection(node)
            return conn  # type: ignore[no-any-return]
        return self.redis  # type: ignore[no-any-return]

    @property
    def _publish(self) -> str:
        # Redisson 3.22+: sharded pub/sub in a cluster (what the module's `auto` publishes too).
        return "SPUBLISH" if self._cluster else "PUBLISH"


@dataclass
class _Hold:
    count: int = 0
    token: Optional[int] = None
    lease_ms: int = 0
    watch: bool = False
    lost: bool = False


class Lock:
    """A Redisson-compatible reentrant lock. Create it with ``LockClient.lock()``.

    The owner id is ``"<client id>:<thread id>"`` unless ``owner`` pins one, so one ``Lock``
    object used from two threads is two owners, and one thread acquiring twice holds it twice.
    """

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
        self._mutex = threading.Lock()

    def __repr__(self) -> str:
        return f"<redislock.Lock {self.name!r} mode={self.client._mode}>"

    @property
    def owner(self) -> str:
        """The owner id of the calling thread (or the pinned one)."""
        return self._owner_id or f"{self.client.id}:{threading.get_ident()}"

    # ---- acquire ---------------------------------------------------------------------------

    def acquire(
        self, blocking: bool = True, timeout: Optional[float] = None, lease: Optional[float] = None
    ) -> bool:
        """Take the lock (again, if this owner holds it). ``blocking=False``: one attempt.
        ``timeout``: wait at most that many seconds (``None``: as long as it takes).
        ``lease``: fixed lease in seconds, no watchdog; ``None``: the client's lease, renewed
        by the watchdog until release. Returns whether the lock is held."""
        return self._acquire_as(self.owner, blocking, timeout, lease)

    def _acquire_as(
        self, owner: str, blocking: bool, timeout: Optional[float], lease: Optional[float]
    ) -> bool:
        if not blocking and timeout is not None:
            raise ValueError("a non-blocking acquire takes no timeout")
        wait = _core.timeout_ms(timeout)
        lease_ms = self.client._lease_ms if lease is None else _core.lease_ms(lease)
        if self.client.mode == "module":
            attempt = self._acquire_module(owner, lease_ms, blocking, wait)
        else:
            attempt = self._acquire_lua(owner, lease_ms, blocking, wait)
        if not attempt.acquired:
            return False
        with self._mutex:
            hold = self._holds.get(owner)
            if hold is None or hold.lost:
                hold = self._holds[owner] = _Hold()
            hold.count += 1
            hold.token = attempt.token
            hold.lease_ms = lease_ms
            hold.watch = hold.watch or lease is None
            watch = hold.watch
        if watch:
            self.client._watchdog.add(self, owner)
        return True

    def _acquire_module(self, owner: str, lease_ms: int, blocking: bool, wait: Optional[int]) -> Attempt:
        wait_arg: Optional[int] = None
        if blocking and wait != 0:
            wait_arg = 0 if wait is None else wait
        cmd = _core.acquire_command(self.name, owner, lease_ms, wait_arg, self.fenced)
        if wait_arg is None and not self.sync_replicas:
            return _core.parse_acquire(self.client.redis.execute_command(*cmd))
        node = self.client._node(self.name)
        replies = _send_on_one_connection(node, [cmd, *self._wait_cmd()], wait_arg)
        attempt = _core.parse_acquire(replies[0])
        return self._check_replicas(attempt, replies[1:], owner)

    def _wait_cmd(self) -> list[list[Union[str, int]]]:
        return [["WAIT", self.sync_replicas, self._sync_ms]] if self.sync_replicas else []

    def _check_replicas(self, attempt: Attempt, wait_reply: list[Any], owner: str) -> Attempt:
        if not attempt.acquired or not self.sync_replicas:
            return attempt
        acked = _core.as_int(wait_reply[0]) if wait_reply else 0
        if acked < self.sync_replicas:
            with contextlib.suppress(redis.exceptions.RedisError):
                self._release_once(owner, lease_ms=None)
            raise ReplicaSyncError(acked, self.sync_replicas)
        return attempt

    def _try_lua(self, owner: str, lease_ms: int) -> Attempt:
        kind = "fenced" if self.fenced else "acquire"
        keys = [self.name, self.token_key] if self.fenced else [self.name]
        script = self.client._script(kind)
        if not self.sync_replicas:
            return _core.parse_acquire(script(keys=keys, args=[lease_ms, owner]))
        pipe = self.client._node(self.name).pipeline(transaction=False)
        script(keys=keys, args=[lease_ms, owner], client=pipe)
        pipe.execute_command("WAIT", self.sync_replicas, self._sync_ms)  # type: ignore[no-untyped-call]
        replies = pipe.execute()
        return self._check_replicas(_core.parse_acquire(replies[0]), replies[1:], owner)

    def _acquire_lua(self, owner: str, lease_ms: int, blocking: bool, wait: Optional[int]) -> Attempt:
        attempt = self._try_lua(owner, lease_ms)
        if attempt.acquired or not blocking or wait == 0:
            return attempt
        deadline = None if wait is None else time.monotonic() + wait / 1000.0
        # Redisson's way: listen for the release message, retry when it comes or when the
        # holder's lease (PTTL) runs out, whichever is first.
        pubsub = self.client.redis.pubsub(ignore_subscribe_messages=True)
        try:
            if self.client._cluster:
                pubsub.ssubscribe(self.channel)
            else:
                pubsub.subscribe(self.channel)
            while True:
                attempt = self._try_lua(owner, lease_ms)
                if attempt.acquired:
                    return attempt
                left = math.inf if deadline is None else deadline - time.monotonic()
                if left <= 0:
                    return attempt
                pause = attempt.pttl / 1000.0 if attempt.pttl >= 0 else 1.0
                _wait_message(pubsub, min(left, max(pause, 0.001)), self.client._cluster)
        finally:
            with contextlib.suppress(Exception):
                pubsub.close()

    # ---- release ---------------------------------------------------------------------------

    def release(self) -> None:
        """Give up one hold; the last frees the lock (the server hands it to the next waiter
        or publishes the release message). Raises NotOwnedError when this owner does not hold
        it, or when the watchdog found it lost."""
        self._release_as(self.owner)

    def _release_as(self, owner: str) -> None:
        with self._mutex:
            hold = self._holds.get(owner)
            if hold is not None and hold.lost:
                del self._holds[owner]
                raise NotOwnedError(f"lock {self.name!r} was lost before release")
        lease = hold.lease_ms if hold is not None else self.client._lease_ms
        self._release_once(owner, lease_ms=lease)

    def _release_once(self, owner: str, lease_ms: Optional[int]) -> None:
        if self.client.mode == "module":
            r = self.client.redis.execute_command("LOCK.RELEASE", self.name, owner)
        else:
            args: list[Union[str, int]] = [
                _core.RELEASE_MESSAGE,
                lease_ms or self.client._lease_ms,
                owner,
                self.client._publish,
            ]
            r = self.client._script("unlock")(keys=[self.name, self.channel], args=args)
        with self._mutex:
            hold = self._holds.get(owner)
            if r is None or _core.as_int(r) == 1:
                self._holds.pop(owner, None)
                self.client._watchdog.remove(self, owner)
            elif hold is not None:
                hold.count = max(1, hold.count - 1)  # the server says it is still held
        if r is None:
            raise NotOwnedError(f"lock {self.name!r} is not held by {owner}")

    # ---- reads -----------------------------------------------------------------------------

    def locked(self) -> bool:
        """Whether anyone holds the lock."""
        return bool(self.client.redis.exists(self.name))

    def owned(self) -> bool:
        """Whether this owner holds the lock."""
        owner = self.owner
        with self._mutex:
            hold = self._holds.get(owner)
            if hold is not None and hold.lost:
                return False
        return bool(self.client.redis.hexists(self.name, owner))

    def hold_count(self) -> int:
        """This owner's hold count, 0 if it does not hold the lock."""
        return _core.as_int(self.client.redis.hget(self.name, self.owner))

    def ttl(self) -> Optional[float]:
        """Seconds left on the lease; None if nobody holds the lock (inf without a TTL)."""
        p = _core.as_int(self.client.redis.pttl(self.name), -2)
        if p == -2:
            return None
        return math.inf if p == -1 else p / 1000.0

    def force_release(self) -> bool:
        """Free the lock whoever holds it. Returns whether there was a lock to free."""
        if self.client.mode == "module":
            r = self.client.redis.execute_command("LOCK.FORCERELEASE", self.name)
        else:
            args = [_core.RELEASE_MESSAGE, self.client._publish]
            r = self.client._script("force")(keys=[self.name, self.channel], args=args)
        return _core.as_int(r) == 1

    @property
    def token(self) -> Optional[int]:
        """Fencing token of this owner's current hold (``fenced=True``), else None."""
        with self._mutex:
            hold = self._holds.get(self.owner)
            return None if hold is None or hold.lost else hold.token

    def __enter__(self) -> Lock:
        if not self.acquire():
            raise LockError(f"could not acquire {self.name!r}")
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.release()

    # ---- watchdog --------------------------------------------------------------------------

    def _watched(self, owner: str) -> Optional[_Hold]:
        with self._mutex:
            hold = self._holds.get(owner)
            return hold if hold is not None and hold.watch and not hold.lost else None

    def _mark_lost(self, owner: str, seen: _Hold) -> bool:
        """The renewal of hold ``seen`` found it gone. Ignored when that hold was released
        meanwhile (and perhaps taken again: a new hold). Returns whether it was marked."""
        with self._mutex:
            hold = self._holds.get(owner)
            if hold is not seen or hold.lost:
                return False
            hold.lost = True
        if self.on_lost is not None:
            try:
                self.on_lost(self)
            except Exception:  # a callback's failure must not stop the watchdog
                log.exception("on_lost callback of %r failed", self.name)
        return True


def _send_on_one_connection(
    node: redis.Redis, commands: list[list[Union[str, int]]], wait_ms: Optional[int]
) -> list[Any]:
    """Send ``commands`` pipelined on one connection and read every reply. The first may block
    server-side for ``wait_ms`` (0: no limit), longer than the connection's socket timeout."""
    pool = node.connection_pool
    try:
        conn = pool.get_connection()
    except TypeError:  # redis-py < 5.3 wants a command name
        conn = pool.get_connection("LOCK.ACQUIRE")
    ok = False
    try:
        conn.send_packed_command(conn.pack_commands(commands))  # type: ignore[no-untyped-call]
        limit = None if not wait_ms else time.monotonic() + wait_ms / 1000.0 + 30.0
        while not conn.can_read(timeout=1.0):
            if limit is not None and time.monotonic() > limit:
                raise redis.exceptions.TimeoutError("no reply to LOCK.ACQUIRE ... WAIT")
        replies: list[Any] = []
        error: Optional[Exception] = None
        for _ in commands:
            try:
                replies.append(conn.read_response())
            except redis.exceptions.ResponseError as e:
                error = error or e
                replies.append(None)
        ok = True
        if error is not None:
            raise error
        return replies
    finally:
        if not ok:
            conn.disconnect()  # type: ignore[no-untyped-call]
        pool.release(conn)


def _wait_message(pubsub: Any, seconds: float, sharded: bool) -> None:
    """Wait up to ``seconds`` for a message on the subscribed channel."""
    end = time.monotonic() + seconds
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return
        if sharded:
            msg = pubsub.get_sharded_message(timeout=min(left, 1.0))
        else:
            msg = pubsub.get_message(timeout=min(left, 1.0))
        if msg is not None and msg.get("type") in ("message", "smessage"):
            return


class _Watchdog:
    """One thread per LockClient: renews every watchdog-kept hold every ``lease / 3``, batched
    in one pipeline. It references its client and the held locks only weakly, so dropping the
    client (or a held Lock object) ends the renewals; ``LockClient.close()`` ends the thread."""

    def __init__(self, client: LockClient) -> None:
        self._client = weakref.ref(client)
        self._period = client._lease_ms / 3000.0
        self._entries: dict[tuple[int, str], weakref.ref[Lock]] = {}
        self._cv = threading.Condition()
        self._thread: Optional[threading.Thread] = None
        self._stopped = False

    def add(self, lock: Lock, owner: str) -> None:
        with self._cv:
            if self._stopped:
                return
            self._entries[(id(lock), owner)] = weakref.ref(lock)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="redislock-watchdog", daemon=True)
                self._thread.start()
            self._cv.notify_all()

    def remove(self, lock: Lock, owner: str) -> None:
        with self._cv:
            self._entries.pop((id(lock), owner), None)

    def stop(self) -> None:
        with self._cv:
            self._stopped = True
            self._entries.clear()
            self._cv.notify_all()
            t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._cv:
                if self._stopped:
                    return
                self._cv.wait(timeout=self._period if self._entries else 1.0)
                if self._stopped:
                    return
                refs = list(self._entries.items())
            client = self._client()
            if client is None:
                return
            entries = [(lock, owner) for (_, owner), ref in refs if (lock := ref()) is not None]
            if entries:
                try:
                    _renew(client, entries)
                except redis.exceptions.ConnectionError:
                    log.warning("lock renewal failed (connection); retrying next tick")
                except Exception:
                    log.exception("lock renewal failed; retrying next tick")
            del client, entries


def _renew(client: LockClient, entries: list[tuple[Lock, str]]) -> None:
    todo = [(lock, owner, hold) for lock, owner in entries if (hold := lock._watched(owner)) is not None]
    if not todo:
        return
    results: list[Any]
    if client.mode == "module":
        pipe = client.redis.pipeline(transaction=False)
        for lock, owner, hold in todo:
            pipe.execute_command("LOCK.RENEW", lock.name, owner, hold.lease_ms)
        results = pipe.execute(raise_on_error=False)
    elif client._cluster:
        script = client._script("renew")
        results = [script(keys=[lock.name], args=[h.lease_ms, owner]) for lock, owner, h in todo]
    else:
        script = client._script("renew")
        pipe2: Pipeline = client.redis.pipeline(transaction=False)
        for lock, owner, hold in todo:
            script(keys=[lock.name], args=[hold.lease_ms, owner], client=pipe2)
        results = pipe2.execute(raise_on_error=False)
    for (lock, owner, hold), r in zip(todo, results):
        if isinstance(r, Exception):
            log.warning("renewal of %r failed: %s", lock.name, r)
        elif _core.as_int(r) == 0 and lock._mark_lost(owner, hold):
            client._watchdog.remove(lock, owner)
