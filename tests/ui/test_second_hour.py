"""Pilot tests for a newcomer's second hour in the TUI (issue 31): the session list follows
a theme switch, a restart reopens the session left open, the footer drops whole items,
Esc and ``?`` in the sidebar, F2 selects the old title, the markdown export holds the whole
history, and a read-only session's composer says so."""

from __future__ import annotations

from pathlib import Path

from rich.segment import Segment

from core.log import user_message
from tests.ui.conftest import SIZE, make_app
from tests.ui.test_app import settle, wait_for
from tui.app.app import DshApp
from tui.app.uistate import UiState, load_ui_state, save_ui_state
from tui.shared.runtime import Runtime


def list_lines(app: DshApp) -> list[list[Segment]]:
    """The session list as drawn now: every line's segments (text and style)."""
    session_list = app.sidebar.option_list
    return [list(session_list.render_line(y)) for y in range(session_list.size.height)]


async def test_theme_switch_redraws_the_session_list(runtime: Runtime, tmp_path: Path) -> None:
    # The list as a fresh start in the light theme draws it ...
    state = tmp_path / "light.json"
    save_ui_state(state, UiState(theme="textual-light"))
    app = make_app(runtime, state_path=state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await wait_for(pilot, lambda: app.theme == "textual-light")
        await pilot.pause()
        expected = list_lines(app)
    # ... is how it looks right after switching to it from the dark one.
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        dark = list_lines(app)
        app.theme = "textual-light"
        await pilot.pause()
        await pilot.pause()
        assert list_lines(app) != dark
        assert list_lines(app) == expected


async def test_a_restart_reopens_the_session_left_open(runtime: Runtime, tmp_path: Path) -> None:
    state = tmp_path / "state" / "tui.json"
    app = make_app(runtime, state_path=state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.current_id == "checkout"  # the newest write
        app.switch_to("search-tuning")
        await wait_for(pilot, lambda: app.current_id == "search-tuning")
        await settle(app, pilot)
    # Another window writes to a different session meanwhile: still the one left open.
    await runtime.store.append("scratch", "message/user", user_message("later", id="later"))
    app = make_app(runtime, state_path=state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.current_id == "search-tuning"
        assert app.sidebar.visible_ids[0] == "scratch"
    # Gone since: the newest write opens instead, and says nothing about it.
    await runtime.store.delete_session("search-tuning")
    app = make_app(runtime, state_path=state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.current_id == "scratch"
        assert app.notice.visible_text == ""


async def test_the_session_left_open_is_kept_per_database(runtime: Runtime, tmp_path: Path) -> None:
    state = tmp_path / "state" / "tui.json"
    other = UiState().with_open_session("/elsewhere/other.sqlite3", "k8s-upgrade")
    save_ui_state(state, other)
    app = make_app(runtime, state_path=state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.current_id == "checkout"  # another database's choice plays no part
        app.switch_to("scratch")
        await wait_for(pilot, lambda: app.current_id == "scratch")
        await settle(app, pilot)
    kept = load_ui_state(state)
    assert kept.open_session("/elsewhere/other.sqlite3") == "k8s-upgrade"
    assert kept.open_session(str(tmp_path / "ui.sqlite3")) == "scratch"
