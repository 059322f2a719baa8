"""The replays are drawn like the UI snapshots: UTC, no NO_COLOR or TEXTUAL_* variables."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _pinned(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name == "NO_COLOR" or name.startswith("TEXTUAL_") or name == "COLORTERM":
            monkeypatch.delenv(name)
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    time.tzset()
