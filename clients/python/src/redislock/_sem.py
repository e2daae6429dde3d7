"""The I/O-free part of the semaphore (Redisson's ``RPermitExpirableSemaphore``), shared by the
blocking and the asyncio clients: names, argument checks, the commands of both modes, reply
parsing, the acquire algorithm (requests for the client to run, as ``_core.acquire_flow``) and the
watchdog's renewal of permits.

Layout: the string ``K`` holds the available permits; the zset ``{K}:timeout`` maps each held
permit id (16 random bytes) to its lease end in ms since the epoch (922337203685477: no lease);
the channel ``redisson_sc:{K}`` carries a count when permits return. Module mode sends
LOCK.SEMSET / SEMACQUIRE / SEMRELEASE / SEMRENEW / SEMINFO; lua mode runs ``lua/sem-*.lua``
with Redisson's KEYS/ARGV and the client's clock, as Redisson does.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Callable

from . import _scripts
from ._core import (
    IDLE_RECHECK,
    MODULE,
    NOT_ACQUIRED,
    Acquired,
    Await,
    Command,
    Hold,
    Listen,
    Request,
    Run,
    Until,
    derived_name,
    evalsha,
    hash_tag,
    is_error,
    module_flow,
    raise_error,
    renew_commands,
    renew_results,
    suffix_name,
)
from ._errors import LockTimeout

SEM = "semaphore"
SEM_CHANNEL_PREFIX = "redisson_sc"
# The zset score of a permit held without a lease (Redisson's).
NO_LEASE = 922337203685477
ID_BYTES = 16
# The most permits one acquire may take (the module's bound on the ids of one call).
MAX_ACQUIRE = 100_000
# The most permits a semaphore may have: Redisson's scripts compute through Lua doubles.
MAX_PERMITS = 2**53 - 1
# After an acquire whose reply was never read, the permit ids are released at once and once more
# this long after (a release that overtook the acquire on another connection finds nothing).
SETTLE_AGAIN = 1.0


def timed_out(name: str, count: int, timeout: float | None) -> LockTimeout:
    return LockTimeout(f"could not acquire {count} permit(s) of {name!r} within {timeout} s")


def check_acquire_permits(permits: object) -> int:
    """How many permits one acquire takes: an int from 1 to MAX_ACQUIRE."""
    if isinstance(permits, bool) or not isinstance(permits, int) or not 1 <= permits <= MAX_ACQUIRE:
        raise ValueError(f"permits must be an int between 1 and {MAX_ACQUIRE}, not {permits!r}")
    return permits


def check_total(permits: object) -> int:
    """A semaphore's total permits: an int from 0 to 2**53 - 1."""
    if isinstance(permits, bool) or not isinstance(permits, int) or not 0 <= permits <= MAX_PERMITS:
        raise ValueError(f"permits must be an int between 0 and {MAX_PERMITS}, not {permits!r}")
    return permits


def new_ids(count: int) -> list[bytes]:
    """Fresh permit ids: 16 random bytes each, as Redisson's."""
    return [os.urandom(ID_BYTES) for _ in range(count)]


def permit_owner(ids: list[bytes] | tuple[bytes, ...]) -> str:
    """The book's name for a permit's hold (the book is keyed by name and owner)."""
    return "permit:" + ids[0].hex()


def now_ms() -> int:
    """The client's clock in ms since the epoch (what Redisson passes as ``now``)."""
    return int(time.time() * 1000)


def zset_name(name: str) -> str:
    return suffix_name(name, "timeout")


def check_cluster_name(name: str) -> None:
    """Lua mode on a cluster: the semaphore, its zset and its channel must share a slot."""
    tags = {hash_tag(name), hash_tag(zset_name(name)), hash_tag(derived_name(SEM_CHANNEL_PREFIX, name))}
    if len(tags) > 1:
        raise ValueError(
            f"semaphore name {name!r} has braces without a valid hash tag: in a cluster its permits and its"
            " channel would be in different slots; use a name without braces or with a tag like 'a{b}'"
        )


@dataclass
class SemTarget:
    """One semaphore as the commands see it: mode, names, how permits returning are announced."""

    mode: str
    key: str
    cluster: bool

    @property
    def zset(self) -> str:
        return zset_name(self.key)

    @property
    def channel(self) -> str:
        return derived_name(SEM_CHANNEL_PREFIX, self.key)

    @property
    def publish(self) -> str:
        return "SPUBLISH" if self.cluster else "PUBLISH"

    def acquire(self, ids: list[bytes], lease: int, wait_ms: int | Until | None) -> Command:
        """Take ``len(ids)`` permits, each until ``lease`` ms from now (all or none)."""
        if self.mode == MODULE:
            wait = ("WAIT", wait_ms) if wait_ms is not None else ()
            return ("LOCK.SEMACQUIRE", self.key, lease, len(ids), *ids, *wait)
        now = now_ms()
        return evalsha(
            _scripts.SEM_ACQUIRE,
            [self.key, self.zset, self.channel],
            [len(ids), now + lease, now, NO_LEASE, self.publish, *ids],
        )

    def release(self, ids: list[bytes] | tuple[bytes, ...]) -> Command:
        """Return the permits of ``ids`` still held; reply how many."""
        if self.mode == MODULE:
            return ("LOCK.SEMRELEASE", self.key, *ids)
        return evalsha(
            _scripts.SEM_RELEASE, [self.key, self.channel, self.zset], [len(ids), now_ms(), self.publish, *ids]
        )

    def renew(self, ids: list[bytes] | tuple[bytes, ...], lease: int) -> Command:
        """Reset the lease of the ids still held to ``lease`` ms from now; reply how many."""
        if self.mode == MODULE:
            return ("LOCK.SEMRENEW", self.key, lease, *ids)
        now = now_ms()
        return evalsha(_scripts.SEM_RENEW, [self.key, self.zset, self.channel], [now + lease, now, self.publish, *ids])

    def available(self) -> Command:
        if self.mode == MODULE:
            return ("LOCK.SEMINFO", self.key)
        return evalsha(_scripts.SEM_AVAILABLE, [self.key, self.zset, self.channel], [now_ms(), self.publish])

    def set_permits(self, permits: int) -> Command:
        """The total (available + held) becomes ``permits``."""
        if self.mode == MODULE:
            return ("LOCK.SEMSET", self.key, permits)
        return evalsha(_scripts.SEM_SET_PERMITS, [self.key, self.channel, self.zset], [permits, self.publish])

    def try_set_permits(self, permits: int) -> Command:
        """Only when the semaphore does not exist; reply 1 set, 0 not."""
        if self.mode == MODULE:
            return ("LOCK.SEMSET", self.key, permits, "NX")
        return evalsha(_scripts.SEM_TRY_SET_PERMITS, [self.key, self.channel], [permits, self.publish])

    def scores(self, ids: list[bytes] | tuple[bytes, ...]) -> Command:
        return ("ZMSCORE", self.zset, *ids)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def info_map(reply: Any) -> dict[str, Any]:
    """LOCK.SEMINFO as a dict with str keys (RESP2 flat array or RESP3 map; nil: empty)."""
    if reply is None:
        return {}
    items = dict(zip(reply[::2], reply[1::2])) if isinstance(reply, list) else dict(reply)
    return {_text(k): v for k, v in items.items()}


def parse_available(mode: str, reply: Any) -> int:
    raise_error(reply)
    if mode == MODULE:
        value = info_map(reply).get("available", 0)
        return 0 if value is None else int(value)
    return int(reply)


def parse_acquire(mode: str, reply: Any) -> Acquired:
    """Taken, or not with the ms until the earliest held permit's lease ends (-1: none will).

    Module: nil / that number. Lua: ``OK`` / ``:<lowest expiry>`` (client-clock ms) / nil."""
    raise_error(reply)
    if mode == MODULE:
        return Acquired(True) if reply is None else Acquired(False, None, int(reply))
    if reply is None:
        return Acquired(False, None, -1)
    text = _text(reply)
    if text == "OK":
        return Acquired(True)
    if text.startswith(":"):
        return Acquired(False, None, max(0, math.ceil(float(text[1:]) - time.time() * 1000)))
    raise ValueError(f"unexpected reply to a semaphore acquire: {reply!r}")


def parse_count(reply: Any) -> int:
    return int(raise_error(reply))


def still_held(reply: Any) -> bool:
    """ZMSCORE of a permit's ids: every id held, none past its lease (client clock)."""
    raise_error(reply)
    now = time.time() * 1000
    return all(score is not None and float(score) > now for score in reply)


@dataclass
class SemAcquirePlan:
    target: SemTarget
    ids: list[bytes]
    lease_ms: int
    blocking: bool
    timeout: float | None

    def _attempt(self, wait_ms: int | Until | None, extra: float) -> Generator[Request, Any, Acquired]:
        replies = yield Run(self.target.key, [self.target.acquire(self.ids, self.lease_ms, wait_ms)], extra)
        return parse_acquire(self.target.mode, replies[0])


def acquire_flow(plan: SemAcquirePlan) -> Generator[Request, Any, Acquired]:
    """Take the permits of ``plan.ids`` (all or none).

    Module mode: LOCK.SEMACQUIRE, with ``WAIT`` when blocking. Lua mode, as Redisson: attempt;
    subscribe to ``redisson_sc:{name}``; attempt again (closes the window before the
    subscription); then wait for a message or until the earliest held permit's lease ends,
    whichever comes first, and attempt again, until taken or out of time.
    """
    deadline = None if plan.timeout is None else time.monotonic() + plan.timeout
    waits = plan.blocking and plan.timeout != 0
    if plan.target.mode == MODULE:
        if waits:
            return (yield from module_flow(plan, deadline, 0.0))
        return (yield from plan._attempt(None, 0.0))
    got = yield from plan._attempt(None, 0.0)
    if got.acquired or not waits:
        return got
    yield Listen(plan.target.key, plan.target.channel)
    while True:
        got = yield from plan._attempt(None, 0.0)
        if got.acquired:
            return got
        pause = IDLE_RECHECK if got.pttl < 0 else max(got.pttl / 1000, 0.001)
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return NOT_ACQUIRED
            pause = min(pause, remaining)
        yield Await(pause)


def permit_hold(
    name: str,
    ids: list[bytes],
    watch: bool,
    on_lost: Any,
    permit: Any,
    lease: float,
    sent: float,
    max_hold: float | None,
) -> Hold:
    """The book's record of one permit (every id of one acquire): renewed by the watchdog when
    ``watch``, lost when its local deadline passes or a renewal finds an id gone."""
    hold = Hold(name, permit_owner(ids), watch, None, on_lost, permit, lease, sent, None, max_hold if watch else None)
    hold.kind = SEM
    hold.ids = tuple(ids)
    return hold


def held_for(hold: Hold | None, default_ms: int) -> float:
    """How long (seconds) a permit's ids may still be held on the server: the rest of its lease
    as the client knows it, at least the client's lease."""
    left = 0.0 if hold is None else hold.expires - time.monotonic()
    return max(default_ms / 1000, left)


def renew_batch(
    mode: str, sem_mode: str | None, cluster: bool, holds: list[tuple[Hold, int]], slot: Callable[[str], int]
) -> list[tuple[Command, list[Hold]]]:
    """The watchdog's batch for one node: the locks' (``_core.renew_commands``), then one
    renewal per permit (LOCK.SEMRENEW, or sem-renew.lua) in the semaphores' mode."""
    locks = [(h, ms) for h, ms in holds if h.kind != SEM]
    batch = renew_commands(mode, locks, slot) if locks else []
    for hold, ms in holds:
        if hold.kind == SEM:
            target = SemTarget(sem_mode or mode, hold.key, cluster)
            batch.append((target.renew(hold.ids, ms), [hold]))
    return batch


def renew_outcomes(reply: Any, group: list[Hold]) -> list[tuple[Hold, bool | None]]:
    """Per hold: True renewed, False lost (a permit: any of its ids gone), None unknown."""
    if group and group[0].kind == SEM:
        hold = group[0]
        if is_error(reply):
            return [(hold, False if str(reply).startswith("WRONGTYPE") else None)]
        return [(hold, int(reply) == len(hold.ids))]
    return renew_results(reply, group)
