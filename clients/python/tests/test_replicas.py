"""sync_replicas: WAIT pipelined with the acquire, with a live and with a stopped replica."""

from __future__ import annotations

import pytest
from conftest import Server, wait_until

import redislock


@pytest.fixture(params=["module", "lua"])
def pair(request: pytest.FixtureRequest, servers: list[Server]) -> tuple[Server, Server]:
    master = Server(module=request.param == "module")
    servers.append(master)
    replica = Server(False, "--replicaof", "127.0.0.1", str(master.port))
    servers.append(replica)
    with replica.client() as rr:
        assert wait_until(lambda: rr.info("replication")["master_link_status"] == "up", timeout=10)
    return master, replica


def test_live_replica_acknowledges(pair: tuple[Server, Server]) -> None:
    master, replica = pair
    with master.client() as r, replica.client() as rr:
        locks = redislock.LockClient(r)
        lock = locks.lock("durable", sync_replicas=1, sync_timeout=2)
        assert lock.acquire()
        # WAIT returned 1: the replica already has the hold and its deadline
        assert rr.hgetall("durable") == r.hgetall("durable") == {lock.owner.encode(): b"1"}
        assert rr.pttl("durable") > 0
        assert int(r.info("commandstats")["cmdstat_wait"]["calls"]) == 1
        with pytest.raises(redislock.ReplicaSyncError) as failure:
            locks.lock("too-many", sync_replicas=2, sync_timeout=0.2).acquire()
        assert (failure.value.acked, failure.value.wanted) == (1, 2)
        assert r.exists("too-many") == 0
        lock.release()
        locks.close()


def test_stopped_replica_releases_and_raises(pair: tuple[Server, Server]) -> None:
    master, replica = pair
    with master.client() as r:
        locks = redislock.LockClient(r)
        lock = locks.lock("fragile", sync_replicas=1, sync_timeout=0.3)
        replica.pause()
        try:
            with pytest.raises(redislock.ReplicaSyncError) as failure:
                lock.acquire()
            assert (failure.value.acked, failure.value.wanted) == (0, 1)
            assert r.exists("fragile") == 0  # given back
            assert not lock.owned() and lock.token is None
        finally:
            replica.resume()
        locks.close()
