"""The lock probe under load (issue 34): a statement that runs longer than a moment has the
holders of what it waits for looked up on a second connection (``_watch_locks``). On a
busy server that happens without any lock, and the probe is stopped before its answer
when the statement ends; its connection must then be closed, not handed to the next
operation: left mid-statement, the next transaction on it failed ("SET TRANSACTION
ISOLATION LEVEL must be called before any query", seen with 100 members on 2 cores)."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

import stores.postgres.connection as pg_connection
from stores import open_store
from stores.postgres import PostgresSessionStore
from tests.pgcluster import Cluster

pytestmark = pytest.mark.timeout(120)

SLOW_PROBE = "SELECT pg_sleep(30)::text WHERE $1::integer IS NOT NULL"
"""A probe whose answer takes long: it is still running when the watched statement ends."""


async def test_a_probe_stopped_before_its_answer_closes_its_connection(
    pg_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, url = pg_cluster.fresh_schema_url(migrated=True)
    monkeypatch.setattr(pg_connection, "_LOCK_PROBE_AFTER_S", 0.05)
    monkeypatch.setattr(pg_connection, "_BLOCKERS_SQL", SLOW_PROBE)
    root = await asyncpg.connect(pg_cluster.url())
    try:
        async with await open_store(url) as store:
            assert isinstance(store, PostgresSessionStore)
            # Both of the pool's connections open now: the probe's acquire (which waits
            # as briefly as the probe's delay) never has to connect on a busy machine.
            pool = store._live()
            async with pool.acquire(), pool.acquire():
                pass

            probes: list[int] = []

            async def slow(conn: asyncpg.Connection) -> int:
                # Runs until the probe (started after 0.05 s) is seen at work.
                deadline = time.monotonic() + 20
                while not probes:
                    assert time.monotonic() < deadline, "the probe never ran"
                    await conn.execute("SELECT pg_sleep(0.05)")
                    probes.extend(
                        row[0]
                        for row in await root.fetch(
                            "SELECT pid FROM pg_stat_activity WHERE query = $1 "
                            "AND state = 'active'",
                            SLOW_PROBE,
                        )
                    )
                return conn.get_server_pid()

            watched = await store._run(slow, write=False)
            [probe] = probes
            assert probe != watched
            # Its connection is closed (its backend goes), not kept for the next operation.
            deadline = time.monotonic() + 30
            while await root.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", probe
            ):
                assert time.monotonic() < deadline, "the stopped probe's connection was kept"
                await asyncio.sleep(0.05)
            # And every operation after it works, on whichever connection the pool gives.
            for _ in range(5):
                await store.list_headers()
                assert await store._run(slow, write=False) > 0
    finally:
        await root.close()
