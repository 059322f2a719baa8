"""Fixtures for the store tests: every shared test runs against both stores."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stores import MemorySessionStore, SessionStore, SqliteSessionStore


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    """A fresh, empty store of each kind (SQLite on a real file in ``tmp_path``)."""
    if request.param == "memory":
        async with MemorySessionStore() as memory:
            yield memory
    else:
        async with await SqliteSessionStore.open(tmp_path / "dsh.sqlite3") as sqlite:
            yield sqlite


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "db" / "dsh.sqlite3"
