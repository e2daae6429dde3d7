"""The I/O-free part of redislock, shared by the blocking and the asyncio clients.

Names, argument checks, the commands of both modes, reply parsing, the acquire algorithm (a
generator that yields requests for the client to run: commands, a subscription, a wait for a
message) and the book of holds the watchdog renews.
"""

from __future__ import annotations

import inspect
import math
import threading
import time
import weakref
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Protocol, Union

from . import _scripts
from ._errors import LockTimeout, NotOwnedError, ReplicaSyncError, UpgradeError

MODULE = "module"
LUA = "lua"
MODES = ("auto", MODULE, LUA)
CHANNEL_PREFIX = "redisson_lock__channel"
TOKEN_PREFIX = "redisson_lock_token"
UNLOCK_MESSAGE = "0"
# Longest wait for a release message before trying again when the holder's lock has no TTL.
IDLE_RECHECK = 5.0
# Added to the read timeout of a blocking LOCK.ACQUIRE ... WAIT beyond the wait itself.
WAIT_MARGIN = 2.0

Command = tuple[Any, ...]
# "Not given": acquire() uses the lock's own timeout.
DEFAULT: Any = object()


def derived_name(prefix: str, name: str) -> str:
    """Redisson's ``prefixName``: ``prefix:{name}``, or ``prefix:name`` when name has a ``{``."""
    return f"{prefix}:{name}" if "{" in name else f"{prefix}:{{{name}}}"


# The longest timeout or lease accepted (about 3 years): finite, fits the server's millisecond
# deadlines and every socket timeout. Wait without limit with ``timeout=None``.
MAX_SECONDS = 1e8


def _encodable(text: str, what: str) -> str:
    """A str redis-py can send: UTF-8 (a lone surrogate would fail only once a connection was
    taken from the pool, with the command half built)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} must be valid Unicode (encodable as UTF-8), not {text!r}") from None
    return text


def check_name(name: object) -> str:
    """A lock name: a non-empty str, or bytes (the key of the same name decoded as UTF-8)."""
    if isinstance(name, (bytes, bytearray, memoryview)):
        try:
            name = bytes(name).decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"a bytes lock name must be UTF-8, not {name!r}") from None
    if not isinstance(name, str) or not name:
        raise ValueError(f"lock name must be a non-empty str or bytes, not {name!r}")
    return _encodable(name, "lock name")


def hash_tag(key: str) -> str:
    """The part of ``key`` a Redis Cluster hashes (its ``{...}`` tag when it has a valid one)."""
    start = key.find("{")
    if start >= 0:
        end = key.find("}", start + 1)
        if end > start + 1:
            return key[start + 1 : end]
    return key


def check_cluster_name(name: str, fenced: bool, kind: str = "lock") -> None:
    """Lua mode on a cluster: the lock, its channel and token key must share a slot, or the
    release script fails with CROSSSLOT (a lock that could be taken but never released)."""
    if kind == "lock":
        tags = {hash_tag(name), hash_tag(derived_name(CHANNEL_PREFIX, name))}
    else:  # a read-write lock: its channel and its read holds' keys too
        tags = {hash_tag(name), hash_tag(derived_name("redisson_rwlock", name)), hash_tag(hold_prefix(name) + ":h")}
    if fenced:
        tags.add(hash_tag(derived_name(TOKEN_PREFIX, name)))
    if len(tags) > 1:
        raise ValueError(
            f"lock name {name!r} has braces without a valid hash tag: in a cluster its lock and its "
            "release channel would be in different slots; use a name without braces or with a tag like 'a{b}'"
        )


def check_owner(owner: object) -> str | None:
    if owner is not None and (not isinstance(owner, str) or not owner):
        raise ValueError(f"owner must be a non-empty str or None, not {owner!r}")
    return None if owner is None else _encodable(owner, "owner")


def check_callback(on_lost: object) -> Any:
    """``on_lost`` must be callable (or None): a TypeError now, not in the watchdog later."""
    if on_lost is not None and not callable(on_lost):
        raise TypeError(f"on_lost must be callable or None, not {type(on_lost).__name__}")
    return on_lost


def check_max_hold(max_hold: object) -> float | None:
    """The cap on a renewed hold (seconds after its acquire), None: renewed until released."""
    if max_hold is None:
        return None
    return lease_ms(max_hold, "max_hold") / 1000


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} must be a number of seconds, not {value!r}")
    if math.isnan(value):
        raise ValueError(f"{what} must not be NaN")
    return float(value)


def lease_ms(lease: object, what: str = "lease") -> int:
    """Seconds (> 0, finite) to whole milliseconds, at least 1."""
    seconds = _number(lease, what)
    if seconds <= 0 or seconds > MAX_SECONDS:
        raise ValueError(f"{what} must be a positive, finite number of seconds (at most {MAX_SECONDS:g})")
    return max(1, round(seconds * 1000))


def hold_lease_ms(lease: float | None, default_ms: int, max_hold: float | None) -> int:
    """The lease of an acquire in ms: `lease` when given (a fixed-lease hold), else the client's
    watchdog lease, no longer than `max_hold` (the longest the hold may be kept)."""
    if lease is not None:
        return lease_ms(lease)
    return default_ms if max_hold is None else min(default_ms, lease_ms(max_hold))


def check_timeout(timeout: object, blocking: object = True) -> float | None:
    if timeout is None:
        return None
    if not blocking:  # as threading.Lock.acquire
        raise ValueError("a non-blocking acquire takes no timeout")
    seconds = _number(timeout, "timeout")
    if seconds < 0 or seconds > MAX_SECONDS:
        raise ValueError(f"timeout must be between 0 and {MAX_SECONDS:g} seconds (None waits without limit)")
    return seconds


# The most replicas WAIT can be asked for (the server parses a 64-bit integer; no deployment has
# more than this).
MAX_REPLICAS = 2**31 - 1


def check_replicas(sync_replicas: object, sync_timeout: object) -> tuple[int, int]:
    if isinstance(sync_replicas, bool) or not isinstance(sync_replicas, int) or not 0 <= sync_replicas <= MAX_REPLICAS:
        raise ValueError(f"sync_replicas must be an int between 0 and {MAX_REPLICAS}, not {sync_replicas!r}")
    return sync_replicas, lease_ms(sync_timeout, "sync_timeout")


def check_mode(mode: object) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    return str(mode)


def module_loaded(reply: Any) -> bool:
    """Interpret ``COMMAND INFO lock.acquire``: an entry when the module is loaded, nil if not."""
    if isinstance(reply, dict):
        return any(v is not None for v in reply.values())
    return bool(reply) and reply[0] is not None


def evalsha(body: str, keys: list[str], args: list[Any]) -> Command:
    return ("EVALSHA", _scripts.SHA[body], len(keys), *keys, *args)


def is_error(reply: Any) -> bool:
    return isinstance(reply, BaseException)


def raise_error(reply: Any) -> Any:
    if isinstance(reply, BaseException):
        raise reply
    return reply


def is_redirect(reply: Any) -> bool:
    """MOVED / ASK / TRYAGAIN / CLUSTERDOWN: ask the cluster for its slots and run again."""
    if not isinstance(reply, BaseException):
        return False
    names = {cls.__name__ for cls in type(reply).__mro__}
    if names & {"MovedError", "AskError", "TryAgainError", "ClusterDownError"}:
        return True
    return str(reply).startswith(("MOVED ", "ASK ", "TRYAGAIN", "CLUSTERDOWN"))


def is_noscript(reply: Any) -> bool:
    return isinstance(reply, BaseException) and (
        type(reply).__name__ == "NoScriptError" or str(reply).startswith("NOSCRIPT")
    )


def uses_scripts(commands: list[Command]) -> bool:
    return any(command[0] == "EVALSHA" for command in commands)


def load_script_commands() -> list[Command]:
    return [("SCRIPT", "LOAD", body) for body in _scripts.ALL]


class Until(float):
    """The ``WAIT`` argument of LOCK.ACQUIRE as an absolute deadline (``time.monotonic()``),
    turned into milliseconds only when the command is sent: the wait for a pooled connection
    (a bounded pool whose connections other waiters hold) comes off the server-side wait."""

    def ms(self) -> int:
        return max(1, math.ceil((self - time.monotonic()) * 1000))


def resolve(commands: list[Command]) -> list[Command]:
    """The commands as sent now: every ``Until`` in milliseconds from now."""
    return [tuple(a.ms() if type(a) is Until else a for a in command) for command in commands]


class Run(NamedTuple):
    """Send ``commands`` pipelined on one connection to the node of ``key``; reply: the replies.

    ``extra`` is added to the connection's socket timeout for the read (``math.inf``: no limit),
    for commands the server answers late on purpose (LOCK.ACQUIRE ... WAIT, WAIT).
    """

    key: str
    commands: list[Command]
    extra: float = 0.0


class Listen(NamedTuple):
    """Subscribe to ``channel`` on the node of ``key`` and wait for the confirmation."""

    key: str
    channel: str


class Await(NamedTuple):
    """Wait up to ``seconds`` for a message on the subscribed channel; reply: whether one came."""

    seconds: float


class Pause(NamedTuple):
    """Sleep ``seconds`` (the client's own wait between polls); reply: None."""

    seconds: float


Request = Union[Run, Listen, Await, Pause]


class Acquired(NamedTuple):
    acquired: bool
    token: int | None = None
    pttl: int = -1


NOT_ACQUIRED = Acquired(False)


# Kinds of lock: a plain RLock, and the two sides of a read-write lock (RReadWriteLock).
PLAIN = "lock"
READ = "read"
WRITE = "write"
RW_CHANNEL_PREFIX = "redisson_rwlock"
WRITE_SUFFIX = ":write"
READ_UNLOCK_MESSAGE = "0"  # a read unlock that frees the lock wakes one waiter
WRITE_UNLOCK_MESSAGE = "1"  # a write unlock or force unlock wakes every waiter


def suffix_name(name: str, suffix: str) -> str:
    """Redisson's ``suffixName``: ``{name}:suffix``, or ``name:suffix`` when name has a ``{``."""
    return f"{name}:{suffix}" if "{" in name else f"{{{name}}}:{suffix}"


def hold_prefix(name: str) -> str:
    """The prefix of a read-write lock's read-hold keys: ``{name}`` (``name`` with a ``{``)."""
    return name if "{" in name else f"{{{name}}}"


def base_owner(kind: str, field: str) -> str:
    """The owner id of a book owner (the hash field: ``<owner>`` or ``<owner>:write``)."""
    return field[: -len(WRITE_SUFFIX)] if kind == WRITE else field


@dataclass
class Target:
    """One lock as the commands see it: mode, names, kind, and how a release is announced.

    The ``owner`` the methods take is the *book owner*: the lock's hash field (``<owner>`` for
    a plain lock and a read hold, ``<owner>:write`` for a write hold), so the book and the
    watchdog keep a thread's read and write holds of one read-write lock apart."""

    mode: str
    key: str
    cluster: bool
    kind: str = PLAIN

    @property
    def channel(self) -> str:
        return derived_name(RW_CHANNEL_PREFIX if self.kind != PLAIN else CHANNEL_PREFIX, self.key)

    @property
    def token_key(self) -> str:
        return derived_name(TOKEN_PREFIX, self.key)

    @property
    def publish(self) -> str:
        # Redisson 3.22+ publishes sharded in a cluster; the module's "auto" publish mode agrees.
        return "SPUBLISH" if self.cluster else "PUBLISH"

    @property
    def _flag(self) -> tuple[str, ...]:
        return () if self.kind == PLAIN else (self.kind.upper(),)

    def timeout_prefix(self, owner: str) -> str:
        """A reader's timeout-key prefix: hold n is ``<prefix>:n``."""
        return suffix_name(self.key, f"{owner}:rwlock_timeout")

    def acquire(self, owner: str, lease: int, fenced: bool, wait_ms: int | Until | None) -> Command:
        if self.mode == MODULE:
            command: list[Any] = ["LOCK.ACQUIRE", self.key, base_owner(self.kind, owner), lease]
            if wait_ms is not None:
                command += ["WAIT", wait_ms]
            if fenced:
                command.append("FENCE")
            return (*command, *self._flag)
        if self.kind == READ:
            return evalsha(
                _scripts.RW_READ_ACQUIRE, [self.key, self.timeout_prefix(owner)], [lease, owner, owner + WRITE_SUFFIX]
            )
        if self.kind == WRITE:
            if fenced:
                return evalsha(_scripts.RW_WRITE_ACQUIRE_FENCED, [self.key, self.token_key], [lease, owner])
            return evalsha(_scripts.RW_WRITE_ACQUIRE, [self.key], [lease, owner])
        if fenced:
            return evalsha(_scripts.ACQUIRE_FENCED, [self.key, self.token_key], [lease, owner])
        return evalsha(_scripts.ACQUIRE, [self.key], [lease, owner])

    def release(self, owner: str, rearm_ms: int = 0) -> Command:
        """One hold less; ``rearm_ms`` > 0 resets the lease while holds remain, 0 keeps it (a
        read release sets the hash's TTL from the remaining holds, as Redisson does)."""
        if self.mode == MODULE:
            rearm = (rearm_ms,) if rearm_ms and self.kind != READ else ()
            return ("LOCK.RELEASE", self.key, base_owner(self.kind, owner), *rearm, *self._flag)
        if self.kind == READ:
            return evalsha(
                _scripts.RW_READ_UNLOCK,
                [self.key, self.channel, self.timeout_prefix(owner), hold_prefix(self.key)],
                [READ_UNLOCK_MESSAGE, owner, self.publish],
            )
        if self.kind == WRITE:
            return evalsha(
                _scripts.RW_WRITE_UNLOCK,
                [self.key, self.channel],
                [WRITE_UNLOCK_MESSAGE, rearm_ms, owner, self.publish],
            )
        return evalsha(_scripts.UNLOCK, [self.key, self.channel], [UNLOCK_MESSAGE, rearm_ms, owner, self.publish])

    def renew(self, owner: str, lease: int) -> Command:
        if self.mode == MODULE:
            return ("LOCK.RENEW", self.key, base_owner(self.kind, owner), lease, *self._flag)
        if self.kind == READ:
            return evalsha(_scripts.RW_READ_RENEW, [self.key, hold_prefix(self.key)], [lease, 1, owner])
        return evalsha(_scripts.RENEW, [self.key], [lease, owner])

    def force_release(self) -> Command:
        """Plain lock: delete it. Read / write side: Redisson's force unlock of that side (the
        lock is deleted only when it is in that mode), in both modes."""
        if self.kind == READ:
            return evalsha(_scripts.RW_READ_FORCE_UNLOCK, [self.key, self.channel], [READ_UNLOCK_MESSAGE, self.publish])
        if self.kind == WRITE:
            return evalsha(
                _scripts.RW_WRITE_FORCE_UNLOCK, [self.key, self.channel], [WRITE_UNLOCK_MESSAGE, self.publish]
            )
        if self.mode == MODULE:
            return ("LOCK.FORCERELEASE", self.key)
        return evalsha(_scripts.FORCE_UNLOCK, [self.key, self.channel], [UNLOCK_MESSAGE, self.publish])

    def force_release_any(self) -> list[Command]:
        """Free a read-write lock whatever its mode (replies: 1 for the one that freed it)."""
        if self.mode == MODULE:
            return [("LOCK.FORCERELEASE", self.key)]
        return [Target(self.mode, self.key, self.cluster, side).force_release() for side in (WRITE, READ)]

    def locked(self) -> Command:
        """Whether the lock (this side of a read-write lock) is held, reply 1/0 or a mode."""
        if self.kind == READ:
            return evalsha(_scripts.RW_READ_LOCKED, [self.key], [])
        if self.kind == WRITE:
            return ("HGET", self.key, "mode")
        return ("EXISTS", self.key)


def parse_locked(kind: str, reply: Any) -> bool:
    if kind == WRITE:
        return reply in (b"write", "write")
    return bool(int(reply))


def parse_acquire(reply: Any, fenced: bool) -> Acquired:
    """nil / PTTL, or with fencing ``[-1, token]`` / ``[pttl, -1]``."""
    if fenced:
        first, token = int(reply[0]), int(reply[1])
        if first == -1 and token != -1:
            return Acquired(True, token)
        return Acquired(False, None, first)
    if reply is None:
        return Acquired(True)
    return Acquired(False, None, int(reply))


def parse_renew(reply: Any) -> bool:
    raise_error(reply)
    value = reply[0] if isinstance(reply, list) else reply
    return int(value) == 1


def parse_release(reply: Any) -> bool:
    """True when the lock was freed, False when holds remain; NotOwnedError on nil."""
    raise_error(reply)
    if reply is None:
        raise NotOwnedError("the lock is not held by this owner")
    return int(reply) == 1


@dataclass
class AcquirePlan:
    target: Target
    owner: str
    lease_ms: int
    fenced: bool
    sync_replicas: int
    sync_timeout_ms: int
    blocking: bool
    timeout: float | None

    def _commands(self, wait_ms: int | Until | None) -> list[Command]:
        commands = [self.target.acquire(self.owner, self.lease_ms, self.fenced, wait_ms)]
        if self.sync_replicas:
            commands.append(("WAIT", self.sync_replicas, self.sync_timeout_ms))
        return commands

    def _attempt(self, wait_ms: int | Until | None, extra: float) -> Generator[Request, Any, Acquired]:
        replies = yield Run(self.target.key, self._commands(wait_ms), extra)
        if is_error(replies[0]) and self.target.kind == WRITE and wait_ms is not None:
            # The module refuses a WRITE ... WAIT by an owner with read holds (it would wait for
            # itself): say so with our own error when that is the cause.
            yield from self.check_upgrade(replies[0])
        got = parse_acquire(raise_error(replies[0]), self.fenced)
        if got.acquired and self.sync_replicas:
            acked = replies[1]
            if is_error(acked) or int(acked) < self.sync_replicas:
                # Not durable enough: give the hold back before reporting it.
                undo = yield Run(self.target.key, [self.target.release(self.owner)])
                raise_error(undo[0])
                raise_error(acked)
                raise ReplicaSyncError(int(acked), self.sync_replicas)
        return got

    def check_upgrade(self, cause: BaseException | None = None) -> Generator[Request, Any, None]:
        """A write acquire that would wait for this owner's own read holds: UpgradeError."""
        owner = base_owner(self.target.kind, self.owner)
        replies = yield Run(self.target.key, [("HEXISTS", self.target.key, owner)])
        if not is_error(replies[0]) and int(replies[0]) == 1:
            raise upgrade_error(self.target.key, owner) from cause


def upgrade_error(name: str, owner: str) -> UpgradeError:
    return UpgradeError(
        f"owner {owner!r} holds read locks of {name!r}: waiting for its write lock would wait for itself"
        " (a read lock cannot be upgraded; release the read holds first, or use blocking=False)"
    )


# An early reply to LOCK.ACQUIRE ... WAIT (the server did not queue the waiter: lock.max-waiters
# reached, an owner id longer than lock.max-waiter-bytes, a replica) is retried after a pause that
# starts here and doubles up to POLL_MAX, never beyond the holder's PTTL or the caller's deadline.
POLL_MIN = 0.01
POLL_MAX = 0.5
# A WAIT reply this close to the caller's deadline is the server's timeout, not an early reply.
EARLY_TOLERANCE = 0.002


class Attempts(Protocol):
    """What the server-side wait loop needs of a plan: one attempt with WAIT (a lock's or a
    semaphore's)."""

    def _attempt(self, wait_ms: int | Until | None, extra: float) -> Generator[Request, Any, Acquired]: ...


def module_flow(plan: Attempts, deadline: float | None, sync_extra: float) -> Generator[Request, Any, Acquired]:
    """LOCK.ACQUIRE (or LOCK.SEMACQUIRE) ... WAIT, again after a pause when the server answered
    before the wait could have ended (it did not queue us), until acquired or the caller's
    deadline."""
    poll = POLL_MIN
    while True:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return NOT_ACQUIRED
        # WAIT 0 means no limit; the read must outlast the server-side wait.
        wait: int | Until = 0 if deadline is None else Until(deadline)
        extra = math.inf if remaining is None else remaining + sync_extra + WAIT_MARGIN
        got = yield from plan._attempt(wait, extra)
        if got.acquired:
            return got
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= EARLY_TOLERANCE:
            return got  # the server's own timeout: the wait is over
        pause = poll if got.pttl <= 0 else min(poll, got.pttl / 1000)
        if left is not None:
            pause = min(pause, left)
        poll = min(POLL_MAX, poll * 2)
        yield Pause(pause)


def acquire_flow(plan: AcquirePlan) -> Generator[Request, Any, Acquired]:
    """The acquire algorithm of both modes, as requests for a client to run.

    Module mode: LOCK.ACQUIRE, with ``WAIT`` when blocking (server-side FIFO queue); when the
    server answers a WAIT before it could have timed out (it did not queue us), poll until the
    caller's deadline. Lua mode, as Redisson: attempt; subscribe to the release channel; attempt
    again (closes the window before the subscription); then wait for a release message or the
    holder's PTTL, whichever comes first, and attempt again, until acquired or out of time.
    """
    sync_extra = plan.sync_timeout_ms / 1000 if plan.sync_replicas else 0.0
    deadline = None if plan.timeout is None else time.monotonic() + plan.timeout
    if plan.target.mode == MODULE:
        if plan.blocking and plan.timeout != 0:
            return (yield from module_flow(plan, deadline, sync_extra))
        return (yield from plan._attempt(None, sync_extra))
    got = yield from plan._attempt(None, sync_extra)
    if got.acquired or not plan.blocking or plan.timeout == 0:
        return got
    if plan.target.kind == WRITE:  # Redisson would wait for itself here (until its holds expire)
        yield from plan.check_upgrade()
    yield Listen(plan.target.key, plan.target.channel)
    while True:
        got = yield from plan._attempt(None, sync_extra)
        if got.acquired:
            return got
        pause = IDLE_RECHECK if got.pttl < 0 else max(got.pttl / 1000, 0.001)
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return NOT_ACQUIRED
            pause = min(pause, remaining)
        yield Await(pause)


def renew_commands(
    mode: str, holds: list[tuple[Hold, int]], slot: Callable[[str], int]
) -> list[tuple[Command, list[Hold]]]:
    """The watchdog's batch for one node: LOCK.RENEW per hold, or one Lua renew per hash slot,
    lease and script (a hold near its ``max_hold`` gets a shorter lease). Plain locks and write
    holds: Redisson's RLock renewal (the write hold's field as owner); read holds: Redisson 4.4's
    read renewal (only this owner's hold keys and the hash). ``holds``: (hold, lease ms)."""
    if mode == MODULE:
        return [(Target(mode, h.key, False, h.kind).renew(h.owner, ms), [h]) for h, ms in holds]
    groups: dict[tuple[int, int, bool], list[Hold]] = {}
    for h, ms in holds:
        groups.setdefault((slot(h.key), ms, h.kind == READ), []).append(h)
    batch: list[tuple[Command, list[Hold]]] = []
    for (_, ms, read), group in groups.items():
        if read:
            keys = [k for h in group for k in (h.key, hold_prefix(h.key))]
            args = [a for h in group for a in (1, h.owner)]
            batch.append((evalsha(_scripts.RW_READ_RENEW, keys, [ms, *args]), group))
        else:
            batch.append((evalsha(_scripts.RENEW, [h.key for h in group], [ms, *(h.owner for h in group)]), group))
    return batch


def renew_results(reply: Any, group: list[Hold]) -> list[tuple[Hold, bool | None]]:
    """Per hold: True renewed, False lost, None unknown (an error: try again soon)."""
    if is_error(reply):
        lost = str(reply).startswith("WRONGTYPE")
        return [(h, False if lost else None) for h in group]
    values = reply if isinstance(reply, list) else [reply]
    return [(h, int(v) == 1) for h, v in zip(group, values)]


def wants_argument(callback: Callable[..., Any]) -> bool:
    """Whether ``on_lost`` takes the lock as an argument (``cb(lock)``) or nothing (``cb()``)."""
    try:
        parameters = inspect.signature(callback).parameters.values()
    except (TypeError, ValueError):
        return True
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return any(p.kind in kinds or p.kind == inspect.Parameter.VAR_POSITIONAL for p in parameters)


Alive = Callable[[], bool]


def thread_alive(thread: threading.Thread) -> Alive:
    """Whether the thread that took a hold still runs (its default owner id dies with it)."""
    ref = weakref.ref(thread)

    def alive() -> bool:
        t = ref()
        return t is not None and t.is_alive()

    return alive


class Hold:
    """This client's holds of one lock by one owner.

    ``expires`` is the local deadline (``time.monotonic()``) of the lease: the time the last
    successful acquire or renewal was sent, plus the lease. When it passes without a renewal,
    the hold is lost whatever the server says (it may have expired there already). ``due`` is
    when the watchdog renews it next (lease / 3 after it was taken or last renewed); ``cap`` the
    end of renewal (``max_hold``); ``holder`` tells whether the thread or task whose default
    owner holds it still exists; ``locks`` are the Lock objects that took it.
    """

    __slots__ = (
        "cap",
        "closing",
        "count",
        "due",
        "expires",
        "holder",
        "ids",
        "key",
        "kind",
        "lease",
        "locks",
        "lost",
        "on_lost",
        "owner",
        "token",
        "watch",
    )

    def __init__(
        self,
        key: str,
        owner: str,
        watch: bool,
        token: int | None,
        on_lost: Any,
        lock: Any,
        lease: float,
        sent: float,
        holder: Alive | None = None,
        max_hold: float | None = None,
    ) -> None:
        self.key = key
        self.owner = owner
        self.kind = "lock"  # or "read" / "write": which side of a read-write lock; "semaphore"
        self.ids: tuple[bytes, ...] = ()  # a semaphore permit's ids
        self.count = 1
        self.watch = watch
        self.token = token
        self.lost = False
        self.closing = False  # the last release is on its way: the watchdog leaves it alone
        self.on_lost = on_lost
        self.locks: list[weakref.ref[Any]] = [weakref.ref(lock)] if lock is not None else []
        self.holder = holder
        self.cap = None if max_hold is None else sent + max_hold
        self.lease = lease
        self.expires = sent
        self.due = sent
        self.renewed(sent, lease)

    def renewed(self, sent: float, lease: float) -> None:
        """The lease was set to ``lease`` seconds by a command sent at ``sent``."""
        self.expires = max(self.expires, sent + lease)
        if self.cap is not None:
            self.expires = min(self.expires, self.cap)
        self.due = sent + self.lease / 3

    def renewal_ms(self, now: float, lease_ms: int) -> int | None:
        """The lease of the next renewal (shorter near ``cap``); None when renewal has ended."""
        if self.cap is None:
            return lease_ms
        left = math.floor((self.cap - now) * 1000)
        return None if left <= 0 else min(lease_ms, left)

    def abandoned(self) -> str | None:
        """Why nobody can release this hold any more (then it is not renewed), or None."""
        if self.locks and all(ref() is None for ref in self.locks):
            return "its Lock or Permit object was garbage-collected"
        if self.holder is not None and not self.holder():
            return "the thread or task that took it has ended"
        return None

    def lock(self) -> Any:
        for ref in self.locks:
            lock = ref()
            if lock is not None:
                return lock
        return None

    def notify_lost(self) -> Any:
        """Call ``on_lost`` (with the lock if it takes an argument); return what it returned."""
        if self.on_lost is None:
            return None
        if wants_argument(self.on_lost):
            return self.on_lost(self.lock())
        return self.on_lost()


class Suspect(NamedTuple):
    """A lock this client may hold more often than it believes (an acquire or release whose
    reply was never read): the server's count for ``owner`` must come down to the book's. For a
    semaphore (kind ``"semaphore"``), the permit ids an acquire may have taken: released again,
    the last time not before ``after`` (monotonic)."""

    key: str
    owner: str
    until: float  # monotonic: after this, whatever the server granted has expired on its own
    kind: str = "lock"
    ids: tuple[bytes, ...] = ()
    after: float = 0.0


class Ticket:
    """One acquire or one release of ``owner`` on ``key`` in flight.

    Every change it makes to the book is made once, under the registry's mutex, and is
    recorded here, so an interrupt landing anywhere (``KeyboardInterrupt`` between any two
    bytecodes) can be answered exactly: an acquire whose hold was recorded but never reached
    the caller is taken off the book again, a release that may not have been sent still takes
    one hold off the book, and the server is then brought to the book (``reconcile``).
    """

    __slots__ = ("applied", "begun", "hold", "key", "kind", "owner", "recorded", "sent")

    def __init__(self, key: str, owner: str, kind: str = "lock") -> None:
        self.key = key
        self.owner = owner
        self.kind = kind
        self.begun = False  # an acquire marked (key, owner) busy
        self.recorded = False  # an acquire recorded one more hold
        self.applied = False  # a release took its hold off the book (or the acquire was undone)
        self.sent = False  # a command may have reached the server
        self.hold: Hold | None = None


class Registry:
    """The holds of one client, keyed by (lock name, owner); safe from several threads."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._holds: dict[tuple[str, str], Hold] = {}
        self._suspects: list[Suspect] = []
        self._busy: dict[tuple[str, str], int] = {}

    def begin(self, ticket: Ticket) -> None:
        """An acquire of ``owner`` is on its way: clean-ups of that owner wait for it."""
        with self._mutex:
            if not ticket.begun:
                ticket.begun = True
                k = (ticket.key, ticket.owner)
                self._busy[k] = self._busy.get(k, 0) + 1

    def _finish(self, ticket: Ticket) -> None:
        if ticket.begun:
            ticket.begun = False
            k = (ticket.key, ticket.owner)
            left = self._busy.pop(k, 1) - 1
            if left > 0:
                self._busy[k] = left

    def finish(self, ticket: Ticket) -> None:
        with self._mutex:
            self._finish(ticket)

    def busy(self, key: str, owner: str) -> bool:
        with self._mutex:
            return (key, owner) in self._busy

    def reset(self) -> None:
        """After fork, in the child: hold nothing (the parent's holds are the parent's)."""
        self._mutex = threading.Lock()
        self._holds = {}
        self._suspects = []
        self._busy = {}

    def get(self, key: str, owner: str) -> Hold | None:
        with self._mutex:
            return self._holds.get((key, owner))

    def add(self, hold: Hold) -> None:
        """Book a hold made whole elsewhere (a semaphore permit: one hold per permit)."""
        with self._mutex:
            self._holds[(hold.key, hold.owner)] = hold

    def remove(self, hold: Hold) -> bool:
        """Take ``hold`` off the book if it is there (a permit released); True if it was."""
        with self._mutex:
            if self._holds.get((hold.key, hold.owner)) is hold:
                del self._holds[(hold.key, hold.owner)]
                return True
            return False

    def count(self, key: str, owner: str) -> int:
        """How many holds this client believes ``owner`` has (0 when none or lost)."""
        with self._mutex:
            hold = self._holds.get((key, owner))
            return 0 if hold is None or hold.lost else hold.count

    def record(
        self,
        ticket: Ticket,
        watch: bool,
        token: int | None,
        on_lost: Any,
        lock: Any,
        lease: float,
        sent: float,
        holder: Alive | None = None,
        max_hold: float | None = None,
    ) -> bool:
        """Record the hold an acquire got and end the acquire, in one step; returns True."""
        key, owner = ticket.key, ticket.owner
        with self._mutex:
            self._finish(ticket)
            hold = self._holds.get((key, owner))
            if hold is None or hold.lost:
                hold = Hold(key, owner, watch, token, on_lost, lock, lease, sent, holder, max_hold)
                hold.kind = ticket.kind
                self._holds[(key, owner)] = hold
            else:
                hold.count += 1
                hold.watch = hold.watch or watch
                hold.closing = False
                hold.lease = lease
                if lock is not None and all(ref() is not lock for ref in hold.locks):
                    hold.locks.append(weakref.ref(lock))
                hold.expires = sent  # a reentrant acquire resets the lease
                hold.renewed(sent, lease)
                if hold.token is None:  # a reentrant acquire keeps the hold's token
                    hold.token = token
            ticket.recorded = True
            ticket.hold = hold
            return True

    def abort(self, ticket: Ticket) -> None:
        """An acquire that raises: end it, and take the hold it recorded (if it got that far)
        off the book again; ``reconcile`` then releases it on the server."""
        with self._mutex:
            self._finish(ticket)
            if ticket.recorded and not ticket.applied:
                ticket.applied = True
                hold = ticket.hold
                if hold is not None and self._holds.get((hold.key, hold.owner)) is hold:
                    hold.count -= 1
                    if hold.count <= 0:
                        del self._holds[(hold.key, hold.owner)]

    def begin_release(self, ticket: Ticket) -> Hold | None:
        """Before a release: a lost hold raises NotOwnedError; the last one stops its renewal."""
        with self._mutex:
            hold = self._holds.get((ticket.key, ticket.owner))
            ticket.hold = hold
            if hold is None:
                return None
            if hold.lost or (hold.watch and time.monotonic() >= hold.expires):
                del self._holds[(ticket.key, ticket.owner)]
                ticket.applied = True
                raise NotOwnedError("the lock was lost (expired or released by someone else)")
            if hold.count <= 1:
                hold.closing = True
            return hold

    def end_release(self, ticket: Ticket, still_held: bool | None) -> bool:
        """Take the released hold off the book, once. ``still_held``: what the server replied
        (None: no reply, one hold less as far as the book knows). True if it changed the book."""
        with self._mutex:
            if ticket.applied:
                return False
            ticket.applied = True
            hold = self._holds.get((ticket.key, ticket.owner))
            if hold is None or (ticket.hold is not None and hold is not ticket.hold):
                return False
            if still_held is False or (still_held is None and hold.count <= 1):
                del self._holds[(ticket.key, ticket.owner)]
            else:
                hold.count = max(1, hold.count - 1)
                hold.closing = False
            return True

    def set_count(self, key: str, owner: str, count: int) -> None:
        """What the server says after an uncertain exchange: ``count`` holds (0: none)."""
        with self._mutex:
            hold = self._holds.get((key, owner))
            if hold is None:
                return
            if count <= 0:
                del self._holds[(key, owner)]
            else:
                hold.count = count
                hold.closing = False

    def drop_key(self, key: str) -> None:
        with self._mutex:
            for k in [k for k in self._holds if k[0] == key]:
                del self._holds[k]

    def _kept(self) -> list[Hold]:
        return [h for h in self._holds.values() if h.watch and not h.closing and not h.lost]

    def watched(self) -> list[Hold]:
        with self._mutex:
            return self._kept()

    def take_due(self, now: float, slack: float) -> tuple[list[Hold], list[tuple[Hold, str]]]:
        """Kept holds due for renewal by ``now + slack`` (batched with the ones due now), and
        the holds nobody can release any more (dropped from the book: not renewed, they expire
        on the server after their lease)."""
        due: list[Hold] = []
        dropped: list[tuple[Hold, str]] = []
        with self._mutex:
            for hold in self._kept():
                why = hold.abandoned()
                if why is not None:
                    del self._holds[(hold.key, hold.owner)]
                    dropped.append((hold, why))
                elif hold.due <= now + slack and now < hold.expires:
                    due.append(hold)
        return due, dropped

    def renewed(self, hold: Hold, sent: float, lease: float) -> None:
        with self._mutex:
            if not hold.lost:
                hold.renewed(sent, lease)

    def retry(self, hold: Hold, when: float) -> None:
        """A renewal that got no answer: try again at ``when``."""
        with self._mutex:
            hold.due = when

    def expired(self, now: float) -> list[Hold]:
        """Kept holds whose local deadline has passed (renewals failed for a whole lease, or
        ``max_hold`` reached)."""
        with self._mutex:
            return [h for h in self._kept() if now >= h.expires]

    def next_wake(self) -> float | None:
        """When the watchdog has something to do next (a renewal or a local deadline)."""
        with self._mutex:
            times = [min(h.due, h.expires) for h in self._kept()]
        return min(times) if times else None

    def lose(self, hold: Hold) -> bool:
        """Mark a hold lost if it is still current; True when its callback is due."""
        with self._mutex:
            if self._holds.get((hold.key, hold.owner)) is not hold or hold.closing or hold.lost:
                return False
            hold.lost = True
            hold.watch = False
            return True

    def suspect(self, item: Suspect) -> None:
        with self._mutex:
            self._suspects.append(item)

    def take_suspects(self) -> list[Suspect]:
        with self._mutex:
            items, self._suspects = self._suspects, []
        now = time.monotonic()
        return [s for s in items if s.until > now]

    def has_suspects(self) -> bool:
        with self._mutex:
            return bool(self._suspects)


def reconcile_commands(target: Target, owner: str, excess: int) -> list[Command]:  # owner: the book's
    """Releases that bring ``owner``'s count down by ``excess`` (keeping the TTL)."""
    return [target.release(owner) for _ in range(max(0, excess))]


def check_locks(locks: object, kind: type[Any]) -> list[Any]:
    """The components of a MultiLock / RedLock: a non-empty collection of ``kind`` locks."""
    if isinstance(locks, (str, bytes)) or not hasattr(locks, "__iter__"):
        raise TypeError(f"a MultiLock takes a list of {kind.__module__}.{kind.__name__}, not {type(locks).__name__}")
    items = list(locks)
    for item in items:
        if not isinstance(item, kind):
            raise TypeError(
                f"a MultiLock takes {kind.__module__}.{kind.__name__} objects (from locks.lock(...)),"
                f" not {type(item).__name__}"
            )
    if not items:
        raise ValueError("a MultiLock needs at least one lock")
    return items


def reply_grace(socket_timeout: float | None) -> float:
    """How long after the caller's deadline an acquire still waits for the server's answer:
    the application's socket timeout (0.25 to 2 s), 2 s without one."""
    if socket_timeout is None:
        return WAIT_MARGIN
    return min(WAIT_MARGIN, max(0.25, socket_timeout))


def hard_deadline(
    wait: float | None, sync_timeout_ms: int, sync_replicas: int, grace: float, deadline: float | None
) -> float | None:
    """The latest time (monotonic) an acquire with a finite ``wait`` may take, round trips
    included: past it the outcome is unknown (TimeoutError, and the client releases whatever
    the server may have granted)."""
    if wait is None:
        return deadline
    hard = time.monotonic() + wait + (sync_timeout_ms / 1000 if sync_replicas else 0.0) + grace
    return hard if deadline is None else min(hard, deadline)


def check_client_default(timeout: object) -> float | None:
    """The ``timeout=`` of ``locks.lock(...)``: the default wait of acquire() and ``with lock:``."""
    return check_timeout(timeout)


def timed_out(name: str, timeout: float | None) -> LockTimeout:
    return LockTimeout(f"could not acquire {name!r} within {timeout} s")


def quorum(count: int, majority: bool) -> int:
    return count // 2 + 1 if majority else count


def redlock_validity(lease_s: float, elapsed_s: float) -> float:
    """Redlock: what is left of the lease after the acquire, less the clock drift allowance."""
    return lease_s - elapsed_s - (0.01 * lease_s + 0.002)


# How long after its own wait a component of a MultiLock / RedLock attempt may still answer
# before the attempt is decided without it (a hung or slow server).
COMPONENT_GRACE = 0.2


def attempt_wait(remaining: float | None, count: int, majority: bool) -> float:
    """How long each component may wait in one attempt of a MultiLock / RedLock.

    As Redisson: a MultiLock attempt may take count x 1.5 s, a RedLock component gets its share
    of the remaining time; both are bounded by what remains, so blocked attempts give every
    component back and retry instead of deadlocking with another multi-lock.
    """
    budget = 1.5 * count if not majority else 1.5
    if remaining is None:
        return budget
    return max(0.0, min(budget, remaining / count if majority else remaining))
