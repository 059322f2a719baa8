"""One path for opening a session: the sidebar and the palette's "Switch to" give the same
result (the draft stays with its session, the transcript, title and sidebar follow), and
refuse alike while the app is busy."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Literal

import pytest
from textual.command import CommandList, CommandPalette
from textual.pilot import Pilot

from core.config import DshConfig
from core.providers.offline import OfflineProvider
from stores import SqliteSessionStore
from tests.ui.conftest import SIZE, make_app, seed
from tests.ui.snapshots import screen_text
from tests.ui.test_app import settle, wait_for
from tests.ui.test_busy import gated
from tui.app.app import DshApp
from tui.shared.runtime import Runtime, open_runtime

Via = Literal["sidebar", "palette"]
LABELS = {"checkout": "Checkout redesign", "k8s-upgrade": "Kubernetes upgrade"}


async def choose(app: DshApp, pilot: Pilot[int], via: Via, session_id: str) -> None:
    """Choose a session the way a user does: Enter on its sidebar row, or "Switch to" in
    the command palette."""
    if via == "sidebar":
        options = app.sidebar.option_list
        options.focus()
        options.highlighted = app.sidebar.visible_ids.index(session_id)
        await pilot.press("enter")
        return
    await pilot.press("ctrl+p")
    await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette))
    await pilot.press(*f"Switch to: {LABELS[session_id]}")

    def found() -> bool:
        if not isinstance(app.screen, CommandPalette):
            return False
        hits = app.screen.query_one(CommandList)
        return hits.option_count == 1 and hits.highlighted == 0

    await wait_for(pilot, found)
    await pilot.press("enter")
    await wait_for(pilot, lambda: not isinstance(app.screen, CommandPalette))


async def opened(app: DshApp, pilot: Pilot[int], session_id: str) -> str:
    await wait_for(pilot, lambda: app.current_id == session_id)
    await settle(app, pilot)
    return screen_text(app)


async def walk(runtime: Runtime, via: Via) -> list[object]:
    """Type a draft, go to another session, type there, come back: what is seen each time."""
    seen: list[object] = []
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press(*"draft for checkout")
        await choose(app, pilot, via, "k8s-upgrade")
        seen += [await opened(app, pilot, "k8s-upgrade"), app.composer.draft]
        assert app.composer.has_focus
        await pilot.press(*"draft for k8s")
        await choose(app, pilot, via, "checkout")
        seen += [await opened(app, pilot, "checkout"), app.composer.draft]
        assert app.composer.has_focus
        seen.append(app.sidebar.option_list.highlighted)
    return seen


@pytest.fixture
async def other_runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    """A second, identical database (its own drafts file too)."""
    path = tmp_path / "other" / "ui.sqlite3"
    path.parent.mkdir()
    store = await SqliteSessionStore.open(path)
    try:
        await seed(store)
        async with open_runtime(
            DshConfig(database=path), store=store, provider=OfflineProvider()
        ) as rt:
            yield rt
    finally:
        await store.close()


async def test_sidebar_and_palette_open_a_session_alike(
    runtime: Runtime, other_runtime: Runtime
) -> None:
    by_sidebar = await walk(runtime, "sidebar")
    by_palette = await walk(other_runtime, "palette")
    assert by_sidebar == by_palette
    k8s_screen, k8s_draft, checkout_screen, checkout_draft, highlighted = by_palette
    assert k8s_draft == "" and checkout_draft == "draft for checkout"
    assert highlighted == 0  # checkout is first in the list
    assert isinstance(k8s_screen, str) and isinstance(checkout_screen, str)
    assert "Kubernetes upgrade" in k8s_screen.splitlines()[0]  # the title bar
    assert "How do we get from 1.27 to 1.30?" in k8s_screen  # the transcript
    assert "Checkout redesign" in checkout_screen.splitlines()[0]
    assert "Can we merge shipping and billing?" in checkout_screen


async def test_while_busy_sidebar_and_palette_both_say_why_and_stay(runtime: Runtime) -> None:
    rt, provider = gated(runtime)
    app = make_app(rt)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press(*"slow one", "enter")
        await asyncio.wait_for(provider.started.wait(), 5)
        await wait_for(pilot, lambda: app.streaming)
        for via in ("sidebar", "palette"):
            app.notice.clear()
            await choose(app, pilot, via, "k8s-upgrade")
            await wait_for(pilot, lambda: bool(app.notice.visible_text))
            assert app.notice.visible_text == (
                "Wait for the current reply (or press Esc) before switching."
            ), via
            assert app.current_id == "checkout"
            assert app.composer.has_focus
        provider.gate.set()
        await wait_for(pilot, lambda: not app.busy)
        assert app.current_id == "checkout"
