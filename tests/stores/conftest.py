"""Fixtures for the store tests: every shared test runs against every store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stores import SessionStore
from tests.storekinds import STORE_KINDS, open_kind


@pytest.fixture(params=STORE_KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    """A fresh, empty store of each kind (SQLite on a real file in ``tmp_path``, PostgreSQL
    in a schema of its own on the suite's throwaway cluster)."""
    async with open_kind(request, tmp_path) as opened:
        yield opened


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "db" / "dsh.sqlite3"
