"""The app and issue 30: a title over ``core.limits`` is a notice naming the limit (nothing
stored)."""

from __future__ import annotations

from textual.widgets import Input

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
