"""MCP end-to-end tests: every test spawns ``dsh mcp`` on a temp database."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "db.sqlite3"
