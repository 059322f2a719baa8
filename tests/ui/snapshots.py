"""SVG snapshot assertions for the UI; baselines live in the top-level ``snapshots/`` folder.

A baseline is written only with ``pytest --snapshot-update`` (after looking at it); a
missing or different baseline fails the test and writes the new rendering beside it as
``<name>.new.svg`` (ignored by git) for inspection.
"""

from __future__ import annotations

import difflib
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.app import App

SNAPSHOT_DIR = Path(__file__).resolve().parents[2] / "snapshots"


def _normalise(svg: str) -> str:
    # Rich names its CSS classes after a hash of the content; keep them, they are stable.
    return re.sub(r"\r\n?", "\n", svg)


SNAPSHOT_THEME = "textual-dark"
"""The theme every baseline is drawn in (Textual's default; a saved theme never leaks in:
the UI tests keep their state in a temp dir)."""


def assert_snapshot(request: pytest.FixtureRequest, app: App[object], name: str) -> None:
    assert app.theme == SNAPSHOT_THEME, f"snapshot drawn in theme {app.theme!r}"
    assert_svg(request, app.export_screenshot(title="dsh"), name)


def assert_svg(request: pytest.FixtureRequest, svg: str, name: str) -> None:
    """``svg`` equals the baseline ``snapshots/NAME.svg`` (``name`` may hold a folder)."""
    svg = _normalise(svg)
    path = SNAPSHOT_DIR / f"{name}.svg"
    if request.config.getoption("--snapshot-update"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(svg, encoding="utf-8")
        return
    candidate = path.with_name(f"{path.stem}.new.svg")
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        candidate.write_text(svg, encoding="utf-8")
        pytest.fail(
            f"no baseline {path.name}; look at {candidate.name}, then run pytest --snapshot-update"
        )
    expected = path.read_text(encoding="utf-8")
    if svg != expected:
        candidate.write_text(svg, encoding="utf-8")
        diff = "".join(
            list(difflib.unified_diff(expected.splitlines(True), svg.splitlines(True), n=1))[:40]
        )
        pytest.fail(f"snapshot {path.name} differs (new rendering in {candidate.name}):\n{diff}")
    candidate.unlink(missing_ok=True)


def screen_text(app: App[object]) -> str:
    """The screen as plain text, one line per terminal row (for content assertions)."""
    import io

    from rich.console import Console

    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        record=True,
        legacy_windows=False,
    )
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    )
    return console.export_text(styles=False)


@pytest.fixture(autouse=True)
def pinned_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The environment every snapshot is drawn in, whatever the developer's shell holds: no
    ``NO_COLOR``, ``COLORTERM`` or ``TEXTUAL_*`` variables, and UTC. Autouse wherever it is
    imported (the snapshot tests, the golden replays)."""
    for name in list(os.environ):
        if name == "NO_COLOR" or name.startswith("TEXTUAL_") or name == "COLORTERM":
            monkeypatch.delenv(name)
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    time.tzset()  # monkeypatch restores TZ after this; conftest's session fixture keeps UTC
