"""Pilot helpers for the reliability UI tests (typed for ``DshApp``; no test-module imports)."""

from __future__ import annotations

import asyncio

from textual.app import App
from textual.pilot import Pilot

from tests.pilot_wait import wait_for
from tests.ui.snapshots import screen_text
from tests.ui.transcript_harness import shown_text
from tui.app.app import DshApp

__all__ = ["screen", "send_idle", "settle", "shown_text", "wait_for"]


def screen(app: DshApp) -> str:
    """The screen as plain text (``tests.ui.snapshots.screen_text`` for a ``DshApp``)."""
    plain_app: App[object] = app  # type: ignore[assignment]
    return screen_text(plain_app)


async def settle(app: DshApp, pilot: Pilot[int], limit: float = 10.0) -> None:
    await pilot.pause()
    await asyncio.wait_for(app.transcript.wait_until_settled(), limit)
    await pilot.pause()


async def send_idle(app: DshApp, pilot: Pilot[int], limit: float = 10.0) -> None:
    await wait_for(pilot, lambda: not app.preparing and not app.streaming, limit)
    await settle(app, pilot, limit)
