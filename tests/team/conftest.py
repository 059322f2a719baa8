"""Faults on a real PostgreSQL server (issue 34): the folder starts a cluster of its own,
which its tests may restart, stop or cut connections of (the session's ``pg_cluster`` is
shared by other tests and never touched here).

Skips locally (saying why) without the PostgreSQL binaries; fails under ``CI=true``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from core.engine import CHUNK_FLUSH_SECONDS
from stores.postgres import PostgresSessionStore
from tests.pgcluster import Cluster, binaries_or_skip, running_cluster


@pytest.fixture
def writes_every_50ms(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reply's chunks written every 50 ms (the engine's default) rather than the
    PostgreSQL store's 0.25 s: a restart mid-reply then surely meets a write in flight,
    the fault these tests are about. (With fewer writes a restart may fall between two:
    the pool reconnects and the reply ends whole, which is as good.)"""
    monkeypatch.setattr(
        PostgresSessionStore, "chunk_flush_seconds", lambda self: CHUNK_FLUSH_SECONDS
    )


@pytest.fixture(scope="package")
def own_cluster() -> Iterator[Cluster]:
    """A cluster for this folder alone (one start for all its tests: starting one costs
    seconds on a busy machine): its tests may restart and stop it, and start it again
    before they end (``url`` checks)."""
    with running_cluster(binaries_or_skip()) as cluster:
        yield cluster


@pytest.fixture
def url(own_cluster: Cluster) -> str:
    """A new, empty schema of ``own_cluster`` (the first store opened on it migrates it).
    A server an earlier test left stopped (it failed midway) is started first."""
    try:
        own_cluster.psql("SELECT 1")
    except subprocess.CalledProcessError:
        own_cluster.start()
    return own_cluster.fresh_schema_url()[1]
