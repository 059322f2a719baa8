"""default_database_path and the DSH_DB override."""

from __future__ import annotations

from pathlib import Path

import platformdirs
import pytest

from stores import SqliteSessionStore, default_database_path


def test_default_is_in_the_user_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DSH_DB", raising=False)
    path = default_database_path()
    assert path.name == "dsh.sqlite3"
    assert path.parent == Path(platformdirs.user_data_dir("dsh", appauthor=False))


def test_dsh_db_overrides(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DSH_DB", str(tmp_path / "elsewhere.db"))
    assert default_database_path() == tmp_path / "elsewhere.db"
    monkeypatch.setenv("DSH_DB", "~/x.db")
    assert default_database_path() == Path.home() / "x.db"
    monkeypatch.setenv("DSH_DB", "")
    assert default_database_path().name == "dsh.sqlite3"


async def test_open_without_a_path_uses_the_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    target = tmp_path / "nested" / "dirs" / "dsh.sqlite3"
    monkeypatch.setenv("DSH_DB", str(target))
    async with await SqliteSessionStore.open() as store:
        assert store.path == target
        await store.create_session("s")
    assert target.is_file()
