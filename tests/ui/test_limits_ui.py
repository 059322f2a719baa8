"""The app and issue 30: a title over ``core.limits`` is a notice naming the limit (nothing
stored), and a session list with rows the store could not read says so in the notice
line, once, while the rest of the list shows."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from textual.widgets import Input

from core.damage import DamagedRow
from stores import SqliteSessionStore
from tests.ui.conftest import SIZE, make_app
from tests.ui.test_app import settle, wait_for
from tui.app.screens.modals import RenameScreen
from tui.shared.runtime import Runtime


async def test_a_title_over_the_limit_is_a_notice(runtime: Runtime) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.current_id == "checkout"
        before = await runtime.store.read_events("checkout")
        await pilot.press("f2")
        await wait_for(pilot, lambda: isinstance(app.screen, RenameScreen))
        app.screen.query_one("#rename-input", Input).value = "é" * 600
        await pilot.press("enter")
        await wait_for(pilot, lambda: "may hold at most" in app.notice.visible_text)
        assert app.notice.visible_text == (
            "Could not rename the session: a title may hold at most 1,024 UTF-8 bytes "
            "(this one has 1,200)."
        )
        assert await runtime.store.read_events("checkout") == before
        entry = app.sidebar.entry("checkout")
        assert entry is not None and entry.title == "Checkout redesign"
        assert app.is_running and app._exception is None


def _damage_title(db: Path, sid: str) -> None:
    with sqlite3.connect(db) as raw:  # a row written by hand
        raw.execute(
            "UPDATE events SET data = 'no json' WHERE kind = 2 AND session = "
            "(SELECT key FROM sessions WHERE id = ?)",
            (sid.encode(),),
        )
    raw.close()


async def test_a_damaged_title_is_told_in_the_notice_line(runtime: Runtime, tmp_path: Path) -> None:
    _damage_title(tmp_path / "ui.sqlite3", "k8s-upgrade")
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await wait_for(pilot, lambda: "could not be read" in app.notice.visible_text)
        assert app.notice.visible_text == (
            "1 session could not be read: the title of session k8s-upgrade is damaged and "
            "not shown (it is not JSON)"
        )
        assert "k8s-upgrade" in app.sidebar.visible_ids  # listed, by its id
        entry = app.sidebar.entry("k8s-upgrade")
        assert entry is not None and entry.title is None
        # told once: the next refresh (the follower's) does not show it again
        app.notice.clear()
        await app.refresh_sessions()
        assert app.notice.visible_text == ""


async def test_damaged_sessions_are_told_in_the_notice_line(
    runtime: Runtime, store: SqliteSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = (
        DamagedRow("session", "its cwd is not valid UTF-8", "mallory\x1b[31m", "m1"),
        DamagedRow("session", "its id is not valid UTF-8", "mallory", None),
    )
    monkeypatch.setattr(store, "damaged_rows", lambda: rows)
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await wait_for(pilot, lambda: "could not be read" in app.notice.visible_text)
        assert app.notice.visible_text == (
            "2 sessions could not be read: a session m1 owned by mallory\\x1b[31m is damaged "
            "and not listed (its cwd is not valid UTF-8) (and 1 more)"
        )
        assert len(app.sidebar.visible_ids) == 4
