"""Every place redislock depends on how redis-py is built inside, for each supported version.

redislock supports redis-py 5.0 to the newest release; ``tests/test_compat.py`` checks each
function here against the installed version (``make test-python`` runs it on 5.0.8 and on the
newest). Everything else in the package uses only redis-py's documented API.

What is used and why:

- ``ConnectionPool.get_connection``: 5.x requires a command name, 5.3+ does not.
- ``Connection.can_read(timeout)``: the public way to wait for a reply longer (or shorter) than
  the connection's ``socket_timeout`` without changing it (no ``conn._sock``).
- ``pool.connection_class`` / ``pool.connection_kwargs``: how the application connects, so the
  watchdog can open connections of its own with the same address, TLS and credentials.
- ``RedisCluster.nodes_manager.initialize()``: re-read the slot map after MOVED/ASK (redis-py
  does this itself only inside ``execute_command``).
- the asyncio cluster node's ``connection_class`` / ``connection_kwargs`` (same reason).
- the application's ``socket_timeout`` in the pool's (or cluster's) connection kwargs: the
  reply grace of a bounded acquire and the timeout of the client's side connections.
- an asyncio Sentinel pool's ``service_name``, ``is_master`` and ``sentinel_manager``
  (``sentinels``, ``sentinel_kwargs``, ``min_other_sentinels``): the blocking ``locks.mode``
  probe asks the same sentinels for the master.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import Any

import redis
import redis.asyncio
import redis.sentinel
from redis.backoff import NoBackoff
from redis.retry import Retry

# Connection options that do not describe where/how to connect and that we set ourselves.
_OWN_OPTIONS = ("socket_timeout", "socket_connect_timeout", "retry", "retry_on_timeout", "retry_on_error")


def get_connection(pool: Any) -> Any:
    try:
        return pool.get_connection()
    except TypeError:  # redis-py < 5.3 wants a command name
        return pool.get_connection("_")


async def get_connection_async(pool: Any) -> Any:
    try:
        return await pool.get_connection()
    except TypeError:  # redis-py < 5.3 wants a command name
        return await pool.get_connection("_")


def wait_readable(conn: Any, seconds: float | None) -> bool:
    """Wait up to ``seconds`` (None: without limit) for a reply to start arriving."""
    return bool(conn.can_read(timeout=seconds))


def pool_params(pool: Any) -> tuple[type[Any], dict[str, Any]]:
    """The connection class and keyword arguments of a (sync or asyncio) connection pool."""
    return pool.connection_class, dict(pool.connection_kwargs)


def bounded_params(kwargs: dict[str, Any], timeout: float, asyncio: bool) -> dict[str, Any]:
    """The same connection, with ``timeout`` for connect and reads and no retries of its own."""
    own = {k: v for k, v in kwargs.items() if k not in _OWN_OPTIONS}
    retry = redis.asyncio.retry.Retry(NoBackoff(), 0) if asyncio else Retry(NoBackoff(), 0)
    own.update(socket_timeout=timeout, socket_connect_timeout=timeout, retry=retry, retry_on_timeout=False)
    return own


def socket_timeout_of(client: Any) -> float | None:
    """The application's ``socket_timeout`` (sync or asyncio ``Redis`` or ``RedisCluster``)."""
    pool = getattr(client, "connection_pool", None)
    if pool is not None:
        kwargs = pool.connection_kwargs
    elif hasattr(client, "nodes_manager") and hasattr(client.nodes_manager, "connection_kwargs"):
        kwargs = client.nodes_manager.connection_kwargs  # sync RedisCluster
    else:
        kwargs = getattr(client, "connection_kwargs", {})  # asyncio RedisCluster
    value = kwargs.get("socket_timeout")
    return None if value is None else float(value)


def own_client(pool: Any, timeout: float) -> redis.Redis:
    """A sync client of its own (own pool) to the server behind ``pool``, bounded timeouts."""
    cls, kwargs = pool_params(pool)
    own = redis.ConnectionPool(connection_class=cls, **bounded_params(kwargs, timeout, False))
    return redis.Redis(connection_pool=own)


def own_client_async(cls: type[Any], kwargs: dict[str, Any], timeout: float) -> redis.asyncio.Redis:
    own = redis.asyncio.ConnectionPool(connection_class=cls, **bounded_params(kwargs, timeout, True))
    return redis.asyncio.Redis(connection_pool=own)


def cluster_node_pool(cluster: Any, key: str) -> Any:
    """The application's connection pool of the node serving ``key`` (sync RedisCluster)."""
    node = cluster.get_node_from_key(key)
    return cluster.get_redis_connection(node).connection_pool


def cluster_node_params_async(cluster: Any, node: Any) -> tuple[type[Any], dict[str, Any]]:
    """Connection class and kwargs of an asyncio cluster node."""
    return node.connection_class, dict(node.connection_kwargs)


def refresh_slots(cluster: Any) -> Any:
    """Read the cluster's slot map again (returns an awaitable for the asyncio cluster)."""
    return cluster.nodes_manager.initialize()


def startup_node_params_async(cluster: Any) -> tuple[type[Any], dict[str, Any]]:
    node = next(iter(cluster.nodes_manager.startup_nodes.values()))
    kwargs = {**node.connection_kwargs, "host": node.host, "port": node.port}
    return node.connection_class, kwargs


_SYNC_CLASSES = {
    "Connection": redis.Connection,
    "UnixDomainSocketConnection": redis.UnixDomainSocketConnection,
    "SSLConnection": redis.SSLConnection,
}


def _init_parameters(cls: type[Any]) -> set[str]:
    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is not None:
            names.update(inspect.signature(init).parameters)
    return names


def sync_twin(cls: type[Any], kwargs: dict[str, Any], timeout: float) -> redis.Redis:
    """A short-lived sync client to the server an asyncio connection class + kwargs point at
    (TCP, unix socket or TLS), for the blocking ``locks.mode`` property."""
    sync_cls: type[Any] | None = None
    for klass in cls.__mro__:
        sync_cls = _SYNC_CLASSES.get(klass.__name__)
        if sync_cls is not None:
            break
    if sync_cls is None:
        raise TypeError(f"no blocking twin for {cls.__name__}; use `await locks.detect_mode()`")
    accepted = _init_parameters(sync_cls)
    own = {k: v for k, v in bounded_params(kwargs, timeout, False).items() if k in accepted}
    return redis.Redis(connection_pool=redis.ConnectionPool(connection_class=sync_cls, **own))


@contextlib.contextmanager
def sentinel_twin(pool: Any, timeout: float) -> Iterator[redis.Redis | None]:
    """For an asyncio Sentinel-managed pool (``Sentinel(...).master_for(...)``): a short-lived
    sync client of the same service, found through the same sentinels (None for other pools).
    Its connection kwargs name no host (the sentinels do): a plain twin would go to localhost."""
    manager = getattr(pool, "sentinel_manager", None)
    service = getattr(pool, "service_name", None)
    if manager is None or service is None:
        yield None
        return
    addresses = []
    for client in manager.sentinels:
        kwargs = client.connection_pool.connection_kwargs
        addresses.append((kwargs.get("host", "localhost"), kwargs.get("port", 26379)))
    sentinel_kwargs = {k: v for k, v in (manager.sentinel_kwargs or {}).items() if k not in _OWN_OPTIONS}
    sentinel_kwargs.update(socket_timeout=timeout, socket_connect_timeout=timeout)
    sentinel: Any = redis.sentinel.Sentinel(  # type: ignore[no-untyped-call]
        addresses, min_other_sentinels=manager.min_other_sentinels, sentinel_kwargs=sentinel_kwargs
    )
    accepted = _init_parameters(redis.SSLConnection) | _init_parameters(redis.Connection)
    kwargs = {k: v for k, v in pool.connection_kwargs.items() if k in accepted and k not in ("host", "port")}
    own = bounded_params(kwargs, timeout, False)
    if "SSL" in pool.connection_class.__name__:
        own["ssl"] = True
    twin = (
        sentinel.master_for(service, **own) if getattr(pool, "is_master", True) else sentinel.slave_for(service, **own)
    )
    try:
        yield twin
    finally:
        twin.close()
        for client in sentinel.sentinels:
            client.close()
