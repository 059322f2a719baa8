"""CLI test helpers: run ``dsh`` in-process on a temp database with a clean environment."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.providers.fake_openai import fake_openai
from tui.cli.commands import main

__all__ = ["fake_openai"]


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


Run = Callable[..., Result]


@pytest.fixture
def dsh_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Isolate config/data dirs and clear every DSH_* variable; returns the database path."""
    for name in list(__import__("os").environ):
        if name.startswith("DSH_") or name == "DEEPSEEK_API_KEY":
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("COLUMNS", "100")
    return tmp_path / "dsh.sqlite3"


@pytest.fixture
def dsh(dsh_env: Path, capsys: pytest.CaptureFixture[str]) -> Run:
    def run(*args: str, db: Path | None = dsh_env) -> Result:
        argv = (["--db", str(db)] if db is not None else []) + list(args)
        code = main(argv)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run
