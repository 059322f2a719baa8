"""Pilot tests for a newcomer's first hour in the TUI (issue 13): the sidebar's filter,
order and labels; focusable reference cards; F4's confirmation and the summary card; the
help screen, the footer, the kept theme and the screenshot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import HelpPanel

from core.log import user_message
from core.references import SessionReferenceInput, format_session_reference_mention
from tests.ui.conftest import SIZE, make_app
from tests.ui.snapshots import screen_text
from tests.ui.test_app import settle, wait_for
from tui.app.app import DshApp
from tui.app.screens.modals import ConfirmScreen
from tui.app.transcript.cards import CheckpointCard, ReferenceCard
from tui.shared.runtime import Runtime


def screen_lines(app: DshApp) -> list[str]:
    return screen_text(app).splitlines()


# --------------------------------------------------------------------------- sidebar


async def test_palette_switch_puts_focus_in_the_composer(runtime: Runtime) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("ctrl+l")  # the filter had focus before the palette opened
        await pilot.press("ctrl+p")
        await pilot.pause(0.2)
        await pilot.press(*"Switch to: Kubernetes")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.current_id == "k8s-upgrade")
        await settle(app, pilot)
        await pilot.press(*"hello")
        assert app.composer.draft == "hello"
        assert app.sidebar.filter_input.value == ""
        assert len(app.sidebar.visible_ids) == 4


async def test_sessions_ordered_by_last_activity_and_restart_opens_the_last_used(
    runtime: Runtime,
) -> None:
    # "scratch" was created first, but is the one used most recently.
    await runtime.store.append("scratch", "message/user", user_message("one more thing", id="late"))
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.sidebar.visible_ids[0] == "scratch"
        assert app.current_id == "scratch"
        # the age shown is that of the last activity, not of the creation
        assert "7d ago" not in screen_lines(app)[4]


async def test_new_session_is_labelled_and_shows_even_under_a_filter(runtime: Runtime) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("ctrl+l", *"infra")
        assert app.sidebar.visible_ids == ["k8s-upgrade"]
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: app.current_id not in (None, "checkout"))
        new_id = app.current_id
        assert new_id is not None
        await pilot.pause()
        assert new_id in app.sidebar.visible_ids
        assert app.sidebar.visible_ids[0] == new_id
        entry = app.sidebar.entry(new_id)
        assert entry is not None and entry.label == "New session"
        text = screen_text(app)
        assert "New session" in text
        assert new_id not in text
        assert app.composer.has_focus


# --------------------------------------------------------------------------- cards


async def _with_card(app: DshApp, pilot: Pilot[int]) -> ReferenceCard:
    await settle(app, pilot)
    mention = format_session_reference_mention(
        SessionReferenceInput("search-tuning", "Search relevance")
    )
    app.composer.set_draft("compare " + mention)
    await pilot.press("enter")
    await wait_for(pilot, lambda: not app.preparing and not app.streaming)
    await settle(app, pilot)
    return app.transcript.query_one(ReferenceCard)


# --------------------------------------------------------------------------- compaction


async def test_f4_asks_first_and_the_summary_shows_without_tags(runtime: Runtime) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("f4")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        await pilot.pause(0.2)
        assert len((await runtime.query.read_surface("checkout")).events) > 1
        await pilot.press("f4")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.click("#yes")
        await wait_for(pilot, lambda: bool(app.transcript.query(CheckpointCard)))
        await settle(app, pilot)
        card = app.transcript.query_one(CheckpointCard)
        card.expanded = True
        await settle(app, pilot)
        text = screen_text(app)
        assert "<compacted-summary>" not in text and "</compacted-summary>" not in text
        assert text.count("Summary of 2 earlier messages") == 1, text
        assert "- user: Can we merge shipping and billing?" in text


# --------------------------------------------------------------------------- help, footer


async def test_keys_panel_closes_with_esc(runtime: Runtime) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.action_show_help_panel()
        await wait_for(pilot, lambda: bool(app.screen.query(HelpPanel)))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.screen.query(HelpPanel))


async def test_footer_shows_esc_ctrl_l_and_help(runtime: Runtime) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        footer = screen_lines(app)[-1]
        for shown in ("esc", "^l", "f1"):
            assert shown in footer.lower(), footer


# --------------------------------------------------------------------------- theme, screenshot


async def test_theme_is_kept_across_restarts(runtime: Runtime, tmp_path: Path) -> None:
    state = tmp_path / "state" / "ui.json"
    app = make_app(runtime, state_path=state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.theme != "nord"
        app.theme = "nord"
        await wait_for(pilot, lambda: state.exists() and "nord" in state.read_text("utf-8"))
    assert json.loads(state.read_text("utf-8"))["theme"] == "nord"
    app = make_app(runtime, state_path=state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await wait_for(pilot, lambda: app.theme == "nord")


async def test_a_broken_state_file_is_ignored(runtime: Runtime, tmp_path: Path) -> None:
    state = tmp_path / "ui.json"
    state.write_text('{"theme": "no-such-theme"', encoding="utf-8")
    app = make_app(runtime, state_path=state)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.theme == "textual-dark"


async def test_screenshot_creates_a_missing_downloads_folder(
    runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    downloads = tmp_path / "home" / "Downloads"
    monkeypatch.setattr("tui.app.app.screenshot_directory", lambda: downloads)
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.deliver_screenshot()
        await wait_for(pilot, lambda: downloads.is_dir() and any(downloads.glob("*.svg")))
        saved = next(downloads.glob("*.svg"))
        assert saved.read_text("utf-8").startswith("<svg")
        await wait_for(pilot, lambda: any(str(saved) in n.message for n in app._notifications))


async def test_screenshot_failure_says_why(
    runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    monkeypatch.setattr("tui.app.app.screenshot_directory", lambda: blocker / "Downloads")
    app = make_app(runtime, cwd=str(blocker / "nowhere"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.deliver_screenshot()
        await wait_for(
            pilot,
            lambda: any(
                "Could not save the screenshot" in n.message and "Not a directory" in n.message
                for n in app._notifications
            ),
        )
