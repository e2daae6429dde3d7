"""Each redis-py internal redislock relies on (``redislock._compat``), checked against the
installed redis-py (``make test-python`` runs this on the oldest supported and the newest)."""

from __future__ import annotations

import time

import pytest
import redis
import redis.asyncio
import redis.asyncio.sentinel
from conftest import Server
from redis.asyncio.cluster import ClusterNode
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import NodesManager, RedisCluster

from redislock import _compat


def test_connection_primitives(server: Server) -> None:
    r = server.client()
    pool = r.connection_pool
    conn = _compat.get_connection(pool)
    try:
        conn.send_command("PING")
        assert _compat.wait_readable(conn, 2.0) is True
        assert conn.read_response() in (b"PONG", "PONG")
        started = time.monotonic()
        assert _compat.wait_readable(conn, 0.2) is False  # nothing pending: waits, then False
        assert 0.15 < time.monotonic() - started < 1.0
    finally:
        pool.release(conn)
    cls, kwargs = _compat.pool_params(pool)
    assert cls is redis.Connection and kwargs["port"] == server.port
    own = _compat.own_client(pool, 0.5)
    assert own.connection_pool is not pool
    assert own.connection_pool.connection_kwargs["socket_timeout"] == 0.5
    assert own.ping()
    own.close()
    r.close()


def test_own_client_has_bounded_timeouts_on_a_hung_server(servers: list[Server]) -> None:
    servers.append(Server(module=False))
    own = _compat.own_client(servers[0].client().connection_pool, 0.3)
    assert own.ping()
    servers[0].pause()
    try:
        started = time.monotonic()
        with pytest.raises(redis.TimeoutError):
            own.ping()
        assert time.monotonic() - started < 1.5  # no retries of its own
    finally:
        servers[0].resume()
        own.close()


async def test_asyncio_primitives(server: Server) -> None:
    ar = redis.asyncio.Redis(port=server.port)
    conn = await _compat.get_connection_async(ar.connection_pool)
    await ar.connection_pool.release(conn)
    cls, kwargs = _compat.pool_params(ar.connection_pool)
    own = _compat.own_client_async(cls, kwargs, 0.5)
    assert await own.ping()
    await own.aclose()
    await own.connection_pool.disconnect()
    twin = _compat.sync_twin(cls, kwargs, 1.0)
    assert twin.ping()
    twin.close()
    await ar.aclose()


def test_cluster_internals_exist() -> None:
    # used on a live cluster by tests/test_cluster.py; here: the names this redis-py has
    assert hasattr(RedisCluster, "get_node_from_key") and hasattr(RedisCluster, "get_redis_connection")
    assert hasattr(AsyncRedisCluster, "get_node_from_key")
    assert hasattr(NodesManager, "initialize")
    node = ClusterNode("127.0.0.1", 1)
    assert hasattr(node, "connection_class") and hasattr(node, "connection_kwargs")


def test_socket_timeout_and_sentinel_internals() -> None:
    """The application's socket timeout (sync and asyncio, plain and cluster clients) and the
    attributes of an asyncio Sentinel pool that sentinel_twin reads (no server needed)."""
    assert _compat.socket_timeout_of(redis.Redis(port=1, socket_timeout=0.7)) == 0.7
    default = redis.asyncio.Redis(port=1)  # None in redis-py 5.0, 5 s in 8.1
    assert _compat.socket_timeout_of(default) == default.connection_pool.connection_kwargs.get("socket_timeout")
    assert _compat.socket_timeout_of(redis.asyncio.Redis(port=1, socket_timeout=3)) == 3.0
    managed = redis.asyncio.sentinel.Sentinel([("127.0.0.1", 1)], min_other_sentinels=0)
    pool = managed.master_for("svc").connection_pool
    assert pool.service_name == "svc" and pool.is_master and pool.sentinel_manager is managed
    assert [s.connection_pool.connection_kwargs["port"] for s in managed.sentinels] == [1]
    assert isinstance(managed.sentinel_kwargs, dict) and managed.min_other_sentinels == 0
    with _compat.sentinel_twin(redis.asyncio.Redis(port=1).connection_pool, 1.0) as none:
        assert none is None
