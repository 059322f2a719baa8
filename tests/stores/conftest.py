"""Fixtures for the store tests: every shared test runs against every store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from stores import SessionStore
from tests.storekinds import DURABLE_KINDS, POOLED_KINDS, durable_location, open_kind


@pytest.fixture(params=POOLED_KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    """A fresh, empty store of each kind (SQLite on a real file in ``tmp_path``, PostgreSQL
    in a schema of its own on the suite's throwaway cluster, directly and through
    PgBouncer in transaction mode)."""
    async with open_kind(request, tmp_path) as opened:
        yield opened


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "db" / "dsh.sqlite3"


@pytest.fixture(params=DURABLE_KINDS)
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh durable store's location (SQLite file, PostgreSQL URL) for child processes."""
    with durable_location(request, tmp_path) as where:
        yield where
