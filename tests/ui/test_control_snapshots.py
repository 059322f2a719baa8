"""SVG snapshots of conversation control (issue 32): a retried reply, an edited message
with its folded history, a fork in the sidebar. Drawn in the pinned environment of
``tests/ui/snapshots.py`` (UTC, the frozen clock, the default theme, a fixed size)."""

from __future__ import annotations

import pytest

from tests.ui.conftest import FIXED_NOW, SIZE, exchange, make_app
from tests.ui.snapshots import assert_snapshot, pinned_environment, screen_text
from tests.ui.test_app import settle
from tests.ui.test_control import expand, focus, idle, items
from tui.app.transcript.history import HistoryFold
from tui.app.transcript.transcript import AssistantMessage, UserMessage
from tui.shared.runtime import Runtime

__all__ = ["pinned_environment"]  # autouse: every test here is drawn in it


async def test_a_retried_reply(runtime: Runtime, request: pytest.FixtureRequest) -> None:
    """The new reply, and the earlier attempt folded above it (expanded here)."""
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await focus(pilot, items(app, AssistantMessage)[-1])
        await pilot.press("r")
        await idle(app, pilot)
        (fold,) = items(app, HistoryFold)
        await expand(app, pilot, fold)
        app.transcript.scroll_end(animate=False, immediate=True)
        await settle(app, pilot)
        text = screen_text(app)
        assert "▾ Earlier attempt" in text and "Yes: one address form" in text
        assert "Request: Can we merge shipping and billing?" in text
        assert_snapshot(request, app, "app_retried_reply")


async def test_an_edited_message_with_folded_history(
    runtime: Runtime, request: pytest.FixtureRequest
) -> None:
    await runtime.store.append_batch(
        "checkout", exchange("And the tax field?", "Keep it as it is.", 2, FIXED_NOW - 60_000)
    )
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await focus(pilot, items(app, UserMessage)[0])
        await pilot.press("e")
        await idle(app, pilot)
        app.composer.set_draft("Can we merge only the address forms?")
        await pilot.press("enter")
        await idle(app, pilot)
        (fold,) = items(app, HistoryFold)
        shown = await expand(app, pilot, fold)
        assert "And the tax field?" in shown
        app.transcript.scroll_home(animate=False, immediate=True)
        await settle(app, pilot)
        assert "▾ Edited — 4 earlier messages" in screen_text(app)
        assert [m.text for m in items(app, UserMessage)] == ["Can we merge only the address forms?"]
        assert_snapshot(request, app, "app_edited_message")


async def test_a_fork_in_the_sidebar(runtime: Runtime, request: pytest.FixtureRequest) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await focus(pilot, items(app, UserMessage)[0])
        await pilot.press("f")
        await idle(app, pilot)
        assert app.current_id != "checkout"
        app.composer.focus()
        await settle(app, pilot)
        text = screen_text(app)
        assert "↳ Fork of Checkout redesign" in text and "of Checkout redesign" in text
        assert "↳ Forked from Checkout redesign at message #1" in text
        assert_snapshot(request, app, "app_fork_sidebar")
