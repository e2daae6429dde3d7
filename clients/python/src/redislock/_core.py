"""What the sync and asyncio clients share: names, argument checks, the Lua scripts of the
``lua`` mode, commands and reply decoding. No I/O here."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Union

CHANNEL_PREFIX = "redisson_lock__channel"
TOKEN_PREFIX = "redisson_lock_token"
RELEASE_MESSAGE = "0"
MODES = ("auto", "module", "lua")

# Our own Lua implementation of Redisson's RLock algorithm (never Redisson's text), with its
# keys, arguments and replies, so lua-mode clients share locks with Redisson and with LOCK.*.

# KEYS lock; ARGV lease ms, owner -> nil (acquired) or the PTTL of the holder.
ACQUIRE_LUA = """
local lock, lease, owner = KEYS[1], ARGV[1], ARGV[2]
if redis.call('exists', lock) == 0 or redis.call('hexists', lock, owner) == 1 then
    redis.call('hincrby', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return nil
end
return redis.call('pttl', lock)
"""

# RFencedLock: KEYS lock, token counter; ARGV lease ms, owner -> {-1, token} or {pttl, -1}.
FENCED_ACQUIRE_LUA = """
local lock, counter, lease, owner = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
if redis.call('exists', lock) == 0 or redis.call('hexists', lock, owner) == 1 then
    redis.call('hincrby', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return {-1, redis.call('incr', counter)}
end
return {redis.call('pttl', lock), -1}
"""

# KEYS lock, channel; ARGV message, lease ms, owner, publish command -> nil / 0 / 1.
UNLOCK_LUA = """
local lock, channel = KEYS[1], KEYS[2]
local message, lease, owner, publish = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if redis.call('hexists', lock, owner) == 0 then
    return nil
end
if redis.call('hincrby', lock, owner, -1) > 0 then
    redis.call('pexpire', lock, lease)
    return 0
end
redis.call('del', lock)
redis.call(publish, channel, message)
return 1
"""

# KEYS lock; ARGV lease ms, owner -> 1 (renewed) / 0.
RENEW_LUA = """
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 1
end
return 0
"""

# KEYS lock, channel; ARGV message, publish command -> 1 (deleted, published) / 0.
FORCE_UNLOCK_LUA = """
if redis.call('del', KEYS[1]) == 0 then
    return 0
end
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1
"""


def derived(prefix: str, name: str) -> str:
    """Redisson's rule for names derived from a lock: ``prefix:{name}``, or ``prefix:name``
    when the name already has a ``{`` (it keeps the lock's hash slot)."""
    return f"{prefix}:{name}" if "{" in name else f"{prefix}:{{{name}}}"


def check_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError("lock name must be a non-empty string")
    return name


def check_owner(owner: object) -> Optional[str]:
    if owner is None:
        return None
    if not isinstance(owner, str) or not owner:
        raise ValueError("owner must be a non-empty string")
    return owner


def _seconds(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ValueError(f"{what} must be a number of seconds")
    return float(value)


def lease_ms(lease: object, what: str = "lease") -> int:
    """A lease in seconds (> 0) as whole milliseconds (at least 1)."""
    s = _seconds(lease, what)
    if s <= 0 or math.isinf(s):
        raise ValueError(f"{what} must be a positive, finite number of seconds")
    return max(1, round(s * 1000))


def timeout_ms(timeout: object, what: str = "timeout") -> Optional[int]:
    """A timeout in seconds (>= 0, or None for no limit) as whole milliseconds."""
    if timeout is None:
        return None
    s = _seconds(timeout, what)
    if s < 0:
        raise ValueError(f"{what} must not be negative")
    if math.isinf(s):
        return None
    return math.ceil(s * 1000)


def check_mode(mode: object) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}")
    return str(mode)


def module_loaded(command_info: Any) -> bool:
    """Whether ``COMMAND INFO lock.acquire`` (as redis-py returns it) describes a command."""
    if isinstance(command_info, dict):
        return any(v for v in command_info.values())
    if isinstance(command_info, (list, tuple)):
        return any(x is not None for x in command_info)
    return bool(command_info)


@dataclass
class Attempt:
    """One acquire attempt's outcome: acquired (with the token of a fenced acquire), or the
    holder's PTTL in ms (-1 without TTL, -2 when the lock was free at that moment)."""

    acquired: bool
    token: Optional[int] = None
    pttl: int = -2


def parse_acquire(reply: Any) -> Attempt:
    if reply is None:
        return Attempt(True)
    if isinstance(reply, (list, tuple)) and len(reply) == 2:
        first, second = int(reply[0]), int(reply[1])
        if first == -1 and second > 0:
            return Attempt(True, token=second)
        return Attempt(False, pttl=first)
    return Attempt(False, pttl=int(reply))


def acquire_command(
    name: str, owner: str, lease: int, wait_ms: Optional[int], fenced: bool
) -> list[Union[str, int]]:
    """``LOCK.ACQUIRE name owner lease [WAIT ms] [FENCE]``; ``wait_ms`` 0 waits without limit."""
    cmd: list[Union[str, int]] = ["LOCK.ACQUIRE", name, owner, lease]
    if wait_ms is not None:
        cmd += ["WAIT", wait_ms]
    if fenced:
        cmd.append("FENCE")
    return cmd


def as_int(value: Any, default: int = 0) -> int:
    if value is None:
        return default
    if isinstance(value, bytes):
        value = value.decode()
    return int(value)
