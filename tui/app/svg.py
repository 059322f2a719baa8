"""The app's screen as SVG without a terminal: the renderer of ``dsh replay --svg`` and of the
snapshot tests (Textual's ``export_screenshot`` of a headless app of a fixed size)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from core.log import now_ms
from tui.app.app import DshApp
from tui.app.transcript.cards import ReferenceCard
from tui.shared.runtime import Runtime

__all__ = ["render_svg"]

SETTLE_SECONDS = 30.0


async def render_svg(
    runtime: Runtime,
    *,
    size: tuple[int, int] = (120, 40),
    expand_cards: bool = False,
    now: Callable[[], int] = now_ms,
) -> str:
    """The screen of the app opened on ``runtime``'s newest session, as SVG."""
    app = DshApp(runtime, now=now, cursor_blink=False, keep_drafts=False)
    async with app.run_test(size=size, headless=True) as pilot:
        await pilot.pause()
        await asyncio.wait_for(app.transcript.wait_until_settled(), SETTLE_SECONDS)
        if expand_cards:
            for card in app.query(ReferenceCard):
                card.expanded = True
            await pilot.pause()
            await asyncio.wait_for(app.transcript.wait_until_settled(), SETTLE_SECONDS)
        await asyncio.wait_for(app.meter.wait_until_settled(), SETTLE_SECONDS)
        await pilot.pause()
        return app.export_screenshot(title="dsh")
