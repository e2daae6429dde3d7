"""The read-write lock op files (``lua/rw-*.lua``): each one's replies and effects as the research
facts state them for its Redisson SHA1, run with EVAL on a plain redis-server (no module).

These files are also the fixtures of the module's differential tests, so the edge cases are the
point: a missing key, no 'mode', stale read holds, the re-entry TTL rules, a writer's own read
holds, nil vs 0 vs 1, the publish command taken from ARGV, the unlock latch."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from conftest import lua_script
from servers import Server

NAME = "rw"
LOCK = NAME
CHANNEL = "redisson_rwlock:{rw}"
KEYPREFIX = "{rw}"
A = "uuid-a:1"
B = "uuid-b:7"
LATCH = "redisson_unlock_latch:{rw}:0123456789abcdef0123456789abcdef"


def timeout_prefix(owner: str) -> str:
    return f"{KEYPREFIX}:{owner}:rwlock_timeout"


def hold(owner: str, n: int) -> str:
    return f"{timeout_prefix(owner)}:{n}"


@pytest.fixture
def r(plain_server: Server) -> Iterator[redis.Redis]:
    client = plain_server.client()
    client.flushall()
    try:
        yield client
    finally:
        client.close()


class Channel:
    """Messages published on the lock's channel while a test runs."""

    def __init__(self, r: redis.Redis) -> None:
        self.pubsub = r.pubsub(ignore_subscribe_messages=True)
        self.pubsub.subscribe(CHANNEL)
        self.pubsub.get_message(timeout=1.0)

    def messages(self) -> list[bytes]:
        out = []
        while True:
            message = self.pubsub.get_message(timeout=0.1)
            if message is None:
                return out
            out.append(message["data"])


@pytest.fixture
def channel(r: redis.Redis) -> Iterator[Channel]:
    ch = Channel(r)
    try:
        yield ch
    finally:
        ch.pubsub.close()


def ev(r: redis.Redis, op: str, keys: list[str], args: list[Any]) -> Any:
    return r.eval(lua_script(op), len(keys), *keys, *args)


def read_acquire(r: redis.Redis, owner: str, lease: int = 30000) -> Any:
    return ev(r, "rw-read-acquire", [LOCK, timeout_prefix(owner)], [lease, owner, owner + ":write"])


def write_acquire(r: redis.Redis, owner: str, lease: int = 30000) -> Any:
    return ev(r, "rw-write-acquire", [LOCK], [lease, owner + ":write"])


def read_unlock(r: redis.Redis, op: str, owner: str, px: int = 10000, publish: str = "PUBLISH") -> Any:
    keys = [LOCK, CHANNEL, timeout_prefix(owner), KEYPREFIX]
    if op == "rw-read-unlock-publish":
        return ev(r, op, keys, [0, owner])
    if op == "rw-read-unlock":
        return ev(r, op, keys, [0, owner, publish])
    return ev(r, op, [*keys, LATCH], [0, owner, publish, px])


def write_unlock(
    r: redis.Redis, op: str, owner: str, lease: int = 30000, px: int = 10000, publish: str = "PUBLISH"
) -> Any:
    if op == "rw-write-unlock-publish":
        return ev(r, op, [LOCK, CHANNEL], [1, lease, owner + ":write"])
    if op == "rw-write-unlock":
        return ev(r, op, [LOCK, CHANNEL], [1, lease, owner + ":write", publish])
    return ev(r, op, [LOCK, CHANNEL, LATCH], [1, lease, owner + ":write", publish, px])


def fields(r: redis.Redis) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in r.hgetall(LOCK).items()}


READ_UNLOCKS = ["rw-read-unlock-publish", "rw-read-unlock", "rw-read-unlock-latch", "rw-read-unlock-latch-nil"]
WRITE_UNLOCKS = ["rw-write-unlock-publish", "rw-write-unlock", "rw-write-unlock-latch", "rw-write-unlock-latch-nil"]
LATCHED = {"rw-read-unlock-latch", "rw-read-unlock-latch-nil", "rw-write-unlock-latch", "rw-write-unlock-latch-nil"}


# ---- read acquire (95553a6f)


def test_read_acquire_free(r: redis.Redis) -> None:
    assert read_acquire(r, A, 20000) is None
    assert fields(r) == {"mode": "read", A: "1"}
    assert r.get(hold(A, 1)) == b"1"
    assert 19000 < r.pttl(hold(A, 1)) <= 20000
    assert 19000 < r.pttl(LOCK) <= 20000


def test_read_acquire_mode_absent_is_free(r: redis.Redis) -> None:
    r.hset(LOCK, "stray", "5")  # a hash without 'mode' counts as free, its fields are kept
    assert read_acquire(r, A, 20000) is None
    assert fields(r) == {"mode": "read", A: "1", "stray": "5"}
    assert 19000 < r.pttl(LOCK) <= 20000


def test_read_reentry_ttl_is_max_of_pttl_and_lease(r: redis.Redis) -> None:
    assert read_acquire(r, A, 50000) is None
    assert read_acquire(r, A, 10000) is None  # the hash keeps its longer PTTL
    assert fields(r) == {"mode": "read", A: "2"}
    assert r.pttl(LOCK) > 40000
    assert 9000 < r.pttl(hold(A, 2)) <= 10000
    assert r.pttl(hold(A, 1)) > 40000
    r.pexpire(LOCK, 1000)
    assert read_acquire(r, B, 30000) is None  # a second reader: a longer lease lengthens the hash
    assert 29000 < r.pttl(LOCK) <= 30000
    assert fields(r) == {"mode": "read", A: "2", B: "1"}


def test_read_acquire_against_writer(r: redis.Redis) -> None:
    assert write_acquire(r, B, 20000) is None
    reply = read_acquire(r, A, 5000)
    assert isinstance(reply, int) and 19000 < reply <= 20000
    assert fields(r) == {"mode": "write", B + ":write": "1"}
    assert not r.exists(hold(A, 1))
    r.persist(LOCK)
    assert read_acquire(r, A) == -1  # no TTL: -1


def test_writer_takes_read_holds(r: redis.Redis) -> None:
    assert write_acquire(r, A, 20000) is None
    assert read_acquire(r, A, 5000) is None
    assert fields(r) == {"mode": "write", A + ":write": "1", A: "1"}
    assert 19000 < r.pttl(LOCK) <= 20000  # max(PTTL, lease)
    assert 4000 < r.pttl(hold(A, 1)) <= 5000


def test_read_acquire_never_publishes(r: redis.Redis, channel: Channel) -> None:
    read_acquire(r, A)
    read_acquire(r, A)
    assert channel.messages() == []


# ---- write acquire (6306ba3b)


def test_write_acquire_free_and_reentry_adds_lease(r: redis.Redis) -> None:
    assert write_acquire(r, A, 20000) is None
    assert fields(r) == {"mode": "write", A + ":write": "1"}
    assert 19000 < r.pttl(LOCK) <= 20000
    assert write_acquire(r, A, 20000) is None
    assert fields(r) == {"mode": "write", A + ":write": "2"}
    assert 38000 < r.pttl(LOCK) <= 40000  # PTTL + lease
    r.persist(LOCK)
    assert write_acquire(r, A, 20000) is None
    assert 18000 < r.pttl(LOCK) <= 19999  # -1 + lease


def test_write_acquire_mode_absent_is_free(r: redis.Redis) -> None:
    r.hset(LOCK, "stray", "5")
    assert write_acquire(r, A, 20000) is None
    assert fields(r) == {"mode": "write", A + ":write": "1", "stray": "5"}


def test_write_acquire_contended(r: redis.Redis) -> None:
    assert read_acquire(r, A, 20000) is None
    reply = write_acquire(r, A, 5000)  # no upgrade, even for the reader itself
    assert isinstance(reply, int) and 19000 < reply <= 20000
    reply = write_acquire(r, B, 5000)
    assert isinstance(reply, int) and 19000 < reply <= 20000
    assert fields(r) == {"mode": "read", A: "1"}
    r.flushall()
    assert write_acquire(r, B, 20000) is None
    reply = write_acquire(r, A, 5000)
    assert isinstance(reply, int) and 19000 < reply <= 20000


def test_write_acquire_never_publishes(r: redis.Redis, channel: Channel) -> None:
    write_acquire(r, A)
    write_acquire(r, A)
    assert channel.messages() == []


# ---- read unlock (f5469be4, 92a54c31, 5947c0fe, 6e1b10e1)


@pytest.mark.parametrize("op", READ_UNLOCKS)
def test_read_unlock_missing_key(r: redis.Redis, channel: Channel, op: str) -> None:
    reply = read_unlock(r, op, A)
    assert channel.messages() == [b"0"]  # publishes anyway
    if op == "rw-read-unlock-latch-nil":
        assert reply is None
        assert r.get(LATCH) == b"1"
        assert read_unlock(r, op, A) == 1  # the retry with the same latch
        assert channel.messages() == []
    elif op == "rw-read-unlock-latch":
        assert reply == 1
        assert r.get(LATCH) == b"1"
        assert 9000 < r.pttl(LATCH) <= 10000
    else:
        assert reply == 1
        assert r.keys("*") == []


@pytest.mark.parametrize("op", READ_UNLOCKS)
def test_read_unlock_not_a_reader(r: redis.Redis, channel: Channel, op: str) -> None:
    read_acquire(r, B)
    before = fields(r)
    assert read_unlock(r, op, A) is None
    assert fields(r) == before
    assert not r.exists(LATCH)
    assert channel.messages() == []


@pytest.mark.parametrize("op", READ_UNLOCKS)
def test_read_unlock_reentrant_then_last(r: redis.Redis, channel: Channel, op: str) -> None:
    read_acquire(r, A)
    read_acquire(r, A)
    assert read_unlock(r, op, A) == 0  # own hold 1 remains: its TTL is the hash's
    assert fields(r) == {"mode": "read", A: "1"}
    assert not r.exists(hold(A, 2))
    assert r.exists(hold(A, 1))
    if op in LATCHED:
        assert r.get(LATCH) == b"0"
        assert read_unlock(r, op, A) == 0  # latched: nothing else happens
        assert fields(r) == {"mode": "read", A: "1"}
        r.delete(LATCH)
    assert read_unlock(r, op, A) == 1
    assert not r.exists(LOCK)
    assert not r.exists(hold(A, 1))
    assert channel.messages() == [b"0"]
    if op in LATCHED:
        assert r.get(LATCH) == b"1"


@pytest.mark.parametrize("op", READ_UNLOCKS)
def test_read_unlock_other_reader_remains(r: redis.Redis, channel: Channel, op: str) -> None:
    read_acquire(r, A, 30000)
    read_acquire(r, B, 8000)
    assert read_unlock(r, op, A) == 0  # A's last hold is gone, but the reply is 0
    assert fields(r) == {"mode": "read", B: "1"}
    assert 7000 < r.pttl(LOCK) <= 8000  # reset to the largest remaining hold PTTL
    assert channel.messages() == []


@pytest.mark.parametrize("op", READ_UNLOCKS)
def test_read_unlock_stale_readers_free_the_lock(r: redis.Redis, channel: Channel, op: str) -> None:
    read_acquire(r, A)
    read_acquire(r, B)
    read_acquire(r, B)
    r.delete(hold(B, 1), hold(B, 2))  # B's timeout keys expired: B no longer counts
    assert read_unlock(r, op, A) == 1
    assert not r.exists(LOCK)  # the whole hash, B's stale field too
    assert channel.messages() == [b"0"]


@pytest.mark.parametrize("op", READ_UNLOCKS)
def test_read_unlock_hold_without_ttl_does_not_count(r: redis.Redis, op: str) -> None:
    read_acquire(r, A)
    read_acquire(r, B)
    r.persist(hold(B, 1))  # PTTL -1 is not > 0
    assert read_unlock(r, op, A) == 1
    assert not r.exists(LOCK)


@pytest.mark.parametrize("op", READ_UNLOCKS)
def test_read_unlock_by_writer_with_read_holds(r: redis.Redis, channel: Channel, op: str) -> None:
    write_acquire(r, A, 20000)
    read_acquire(r, A, 5000)
    assert read_unlock(r, op, A) == 0  # other field (the write hold) remains, no live read hold:
    assert fields(r) == {"mode": "write", A + ":write": "1"}  # mode write -> 0
    assert 19000 < r.pttl(LOCK) <= 20000  # the hash's TTL untouched
    assert channel.messages() == []
    if op in LATCHED:
        assert r.get(LATCH) == b"0"


@pytest.mark.parametrize("op", ["rw-read-unlock", "rw-read-unlock-latch", "rw-read-unlock-latch-nil"])
def test_read_unlock_publish_command_from_argv(r: redis.Redis, channel: Channel, op: str) -> None:
    read_acquire(r, A)
    assert read_unlock(r, op, A, publish="publish") == 1  # called as given: lowercase works
    assert channel.messages() == [b"0"]
    r.delete(LATCH)
    read_acquire(r, A)
    with pytest.raises(redis.ResponseError):
        read_unlock(r, op, A, publish="NOSUCHCOMMAND")
    assert not r.exists(LOCK)  # not rolled back: the DEL came before the publish


@pytest.mark.parametrize("op", ["rw-read-unlock-latch", "rw-read-unlock-latch-nil"])
def test_read_unlock_latch_value_and_bad_px(r: redis.Redis, op: str) -> None:
    r.set(LATCH, "7")
    assert read_unlock(r, op, A) == 7
    r.set(LATCH, "x")
    assert read_unlock(r, op, A) is None  # tonumber('x') is nil
    r.delete(LATCH)
    read_acquire(r, A)
    with pytest.raises(redis.ResponseError, match="invalid expire time"):
        read_unlock(r, op, A, px=0)
    assert not r.exists(LOCK)  # the lock's writes stay


# ---- write unlock (baa634f6, 319a1cdf, d29c5559, 21f5fb0f)


@pytest.mark.parametrize("op", WRITE_UNLOCKS)
def test_write_unlock_missing_key(r: redis.Redis, channel: Channel, op: str) -> None:
    reply = write_unlock(r, op, A)
    assert channel.messages() == [b"1"]
    if op == "rw-write-unlock-latch-nil":
        assert reply is None
        assert r.get(LATCH) == b"1"
        assert write_unlock(r, op, A) == 1
    elif op == "rw-write-unlock-latch":
        assert reply == 1
        assert r.get(LATCH) == b"1"
    else:
        assert reply == 1
        assert r.keys("*") == []


@pytest.mark.parametrize("op", WRITE_UNLOCKS)
def test_write_unlock_not_the_writer(r: redis.Redis, channel: Channel, op: str) -> None:
    read_acquire(r, A)
    assert write_unlock(r, op, A) is None  # mode read
    assert fields(r) == {"mode": "read", A: "1"}
    r.flushall()
    write_acquire(r, B)
    assert write_unlock(r, op, A) is None
    assert fields(r) == {"mode": "write", B + ":write": "1"}
    assert not r.exists(LATCH)
    assert channel.messages() == []


@pytest.mark.parametrize("op", WRITE_UNLOCKS)
def test_write_unlock_reentrant_then_last(r: redis.Redis, channel: Channel, op: str) -> None:
    write_acquire(r, A, 20000)
    write_acquire(r, A, 20000)
    assert write_unlock(r, op, A, lease=7000) == 0
    assert fields(r) == {"mode": "write", A + ":write": "1"}
    assert 6000 < r.pttl(LOCK) <= 7000  # PEXPIRE ARGV[2]
    if op in LATCHED:
        assert r.get(LATCH) == b"0"
        r.delete(LATCH)
    assert write_unlock(r, op, A) == 1
    assert not r.exists(LOCK)
    assert channel.messages() == [b"1"]
    if op in LATCHED:
        assert r.get(LATCH) == b"1"


@pytest.mark.parametrize("op", WRITE_UNLOCKS)
def test_write_unlock_downgrade(r: redis.Redis, channel: Channel, op: str) -> None:
    write_acquire(r, A, 20000)
    read_acquire(r, A, 5000)
    assert write_unlock(r, op, A) == 1
    assert fields(r) == {"mode": "read", A: "1"}  # mode read, no message
    assert channel.messages() == []
    assert read_acquire(r, B) is None  # readable now


@pytest.mark.parametrize("op", ["rw-write-unlock-latch", "rw-write-unlock-latch-nil"])
def test_write_unlock_latch(r: redis.Redis, op: str) -> None:
    r.set(LATCH, "0")
    assert write_unlock(r, op, A) == 0
    write_acquire(r, A)
    r.delete(LATCH)
    with pytest.raises(redis.ResponseError, match="invalid expire time"):
        write_unlock(r, op, A, px=0)
    assert not r.exists(LOCK)


# ---- force unlock (23f9bc91, 27dbe744, 23639b0b, 2e2cb2a3)


@pytest.mark.parametrize("op", ["rw-read-forceunlock-publish", "rw-read-forceunlock"])
def test_read_forceunlock(r: redis.Redis, channel: Channel, op: str) -> None:
    args: list[Any] = [0] if op.endswith("publish") else [0, "publish"]
    assert ev(r, op, [LOCK, CHANNEL], args) == 0  # missing
    write_acquire(r, A)
    read_acquire(r, A)
    assert ev(r, op, [LOCK, CHANNEL], args) == 0  # write-locked: untouched
    assert r.exists(LOCK)
    r.flushall()
    read_acquire(r, A)
    read_acquire(r, B)
    assert ev(r, op, [LOCK, CHANNEL], args) == 1
    assert not r.exists(LOCK)
    assert r.exists(hold(A, 1))  # timeout keys are left to expire
    assert channel.messages() == [b"0"]


@pytest.mark.parametrize("op", ["rw-write-forceunlock-publish", "rw-write-forceunlock"])
def test_write_forceunlock(r: redis.Redis, channel: Channel, op: str) -> None:
    args: list[Any] = [1] if op.endswith("publish") else [1, "PUBLISH"]
    assert ev(r, op, [LOCK, CHANNEL], args) == 0
    read_acquire(r, A)
    assert ev(r, op, [LOCK, CHANNEL], args) == 0
    assert r.exists(LOCK)
    r.flushall()
    write_acquire(r, A)
    read_acquire(r, A)
    assert ev(r, op, [LOCK, CHANNEL], args) == 1
    assert not r.exists(LOCK)
    assert channel.messages() == [b"1"]


# ---- isLocked (8ad44f1b)


def test_read_islocked(r: redis.Redis) -> None:
    def islocked() -> Any:
        return ev(r, "rw-read-islocked", [LOCK], [])

    assert islocked() == 0
    read_acquire(r, A)
    assert islocked() == 1
    r.flushall()
    write_acquire(r, A)
    assert islocked() == 0
    read_acquire(r, A)
    assert islocked() == 1


# ---- renewal (6563941f, 1affef78, d6564f42, 38d2b478)


def test_read_renew(r: redis.Redis) -> None:
    assert ev(r, "rw-read-renew", [LOCK, KEYPREFIX], [60000, A]) == 0
    assert r.keys("*") == []
    read_acquire(r, A, 1000)
    read_acquire(r, A, 1000)
    read_acquire(r, B, 1000)
    assert ev(r, "rw-read-renew", [LOCK, KEYPREFIX], [60000, A]) == 1
    for key in (LOCK, hold(A, 1), hold(A, 2), hold(B, 1)):  # other owners' holds too
        assert r.pttl(key) > 59000, key


def test_read_renew_batch(r: redis.Redis) -> None:
    read_acquire(r, A, 1000)
    read_acquire(r, A, 1000)
    read_acquire(r, B, 1000)
    r.hset("other", "mode", "read")
    reply = ev(r, "rw-read-renew-batch", [LOCK, KEYPREFIX, "other", "{other}"], [60000, A, A])
    assert reply == [1, 0]
    for key in (LOCK, hold(A, 1), hold(A, 2), hold(B, 1)):
        assert r.pttl(key) > 59000, key
    assert r.pttl("other") == -1


def test_read_renew_batch_own_renews_only_listed_fields(r: redis.Redis) -> None:
    read_acquire(r, A, 1000)
    read_acquire(r, A, 1000)
    read_acquire(r, B, 1000)
    r.hset("other", mapping={"mode": "read", B: "1"})
    reply = ev(
        r,
        "rw-read-renew-batch-own",
        [LOCK, KEYPREFIX, "other", "{other}", "third", "{third}"],
        [60000, 2, A, "uuid-a:9", 1, A, 0],
    )
    assert reply == [1, 0, 0]
    for key in (LOCK, hold(A, 1), hold(A, 2)):
        assert r.pttl(key) > 59000, key
    assert r.pttl(hold(B, 1)) <= 1000  # another owner's hold is not renewed
    assert r.pttl("other") == -1


def test_read_renew_batch_bug_first_lock_count_one(r: redis.Redis) -> None:
    read_acquire(r, A, 1000)
    assert ev(r, "rw-read-renew-batch-bug", [LOCK, KEYPREFIX], [60000, A]) == [1]
    assert r.pttl(LOCK) > 59000
    assert r.pttl(hold(A, 1)) > 59000  # right for lock 1 with count 1


def test_read_renew_batch_bug_reentrant_hold_aborts(r: redis.Redis) -> None:
    read_acquire(r, A, 1000)
    read_acquire(r, A, 1000)
    with pytest.raises(redis.ResponseError, match="concatenate"):
        ev(r, "rw-read-renew-batch-bug", [LOCK, KEYPREFIX], [60000, A])
    assert r.pttl(LOCK) > 59000  # the lock key was PEXPIREd before the error
    assert r.pttl(hold(A, 2)) <= 1000


def test_read_renew_batch_bug_second_lock(r: redis.Redis) -> None:
    r.hset("other", mapping={"mode": "read", B: "1"})
    r.set("{other}:" + B + ":rwlock_timeout:1", 1, px=1000)
    read_acquire(r, A, 1000)
    r.set(f"{KEYPREFIX}:{B}:rwlock_timeout:1", 1, px=1000)  # where the bug looks for lock 2's hold
    reply = ev(r, "rw-read-renew-batch-bug", [LOCK, KEYPREFIX, "other", "{other}"], [60000, A, B])
    assert reply == [1, 1]
    assert r.pttl("other") > 59000
    assert r.pttl("{other}:" + B + ":rwlock_timeout:1") <= 1000  # not renewed
    assert r.pttl(f"{KEYPREFIX}:{B}:rwlock_timeout:1") > 59000  # the wrong key was


def test_read_renew_missing_all_zero(r: redis.Redis) -> None:
    for op in ("rw-read-renew-batch", "rw-read-renew-batch-bug"):
        assert ev(r, op, [LOCK, KEYPREFIX, "x", "{x}"], [60000, A, A]) == [0, 0]
    assert ev(r, "rw-read-renew-batch-own", [LOCK, KEYPREFIX], [60000, 1, A]) == [0]
    assert r.keys("*") == []


def test_write_hold_renewed_by_plain_renew(r: redis.Redis) -> None:
    write_acquire(r, A, 1000)
    assert ev(r, "renew-batch", [LOCK], [60000, A + ":write"]) == [1]
    assert r.pttl(LOCK) > 59000
