"""The session-reference tests that read real sessions run against every store kind."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stores import SessionStore
from tests.storekinds import STORE_KINDS, open_kind


@pytest.fixture(params=STORE_KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    """A fresh, empty store of each kind (memory, SQLite file, PostgreSQL schema)."""
    async with open_kind(request, tmp_path) as opened:
        yield opened
