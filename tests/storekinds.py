"""The store kinds every shared store test runs against: memory, SQLite and PostgreSQL.

``open_kind`` opens a fresh, empty store of the fixture's kind; a PostgreSQL store gets a
schema of its own on the session's throwaway cluster (``pg_cluster``), dropped afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from core.store import SessionStore
from stores import MemorySessionStore, open_store
from tests.pgcluster import Cluster

__all__ = [
    "DURABLE_KINDS",
    "POOLED_KINDS",
    "STORE_KINDS",
    "durable_location",
    "open_kind",
    "pg_schema_url",
]

STORE_KINDS = ["memory", "sqlite", "postgres"]
POOLED_KINDS = [*STORE_KINDS, "pgbouncer"]
"""With PostgreSQL through PgBouncer in transaction mode too: the store's own tests."""


@contextlib.contextmanager
def pg_schema_url(cluster: Cluster, *, migrated: bool = False) -> Iterator[str]:
    """The URL of a new schema of its own (the cluster is thrown away at the end of the
    run, so nothing is dropped)."""
    _name, url = cluster.fresh_schema_url(migrated=migrated)
    yield url


@contextlib.asynccontextmanager
async def open_kind(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    kind = request.param
    if kind == "memory":
        async with MemorySessionStore() as memory:
            yield memory
    elif kind == "sqlite":
        store = await open_store(tmp_path / "dsh.sqlite3")
        try:
            yield store
        finally:
            await store.close()
    elif kind == "pgbouncer":
        cluster = request.getfixturevalue("pg_cluster")
        bouncer = request.getfixturevalue("pg_bouncer")
        name, _url = cluster.fresh_schema_url(migrated=True)
        store = await open_store(bouncer.url(search_path=name))
        try:
            yield store
        finally:
            await store.close()
    else:
        cluster: Cluster = request.getfixturevalue("pg_cluster")
        with pg_schema_url(cluster, migrated=True) as url:
            store = await open_store(url)
            try:
                yield store
            finally:
                await store.close()


DURABLE_KINDS = ["sqlite", "postgres"]


@contextlib.contextmanager
def durable_location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where a fresh store of the fixture's durable kind lives, as ``open_store`` takes it
    (a SQLite file path, or a PostgreSQL URL to an empty schema, through PgBouncer for
    ``pgbouncer``): for child processes."""
    if request.param == "sqlite":
        yield str(tmp_path / "dsh.sqlite3")
    elif request.param == "pgbouncer":
        name, _url = request.getfixturevalue("pg_cluster").fresh_schema_url(migrated=True)
        yield request.getfixturevalue("pg_bouncer").url(search_path=name)
    else:
        with pg_schema_url(request.getfixturevalue("pg_cluster"), migrated=True) as url:
            yield url
