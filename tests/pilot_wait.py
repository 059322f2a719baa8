"""Waiting in a Pilot test until something holds."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from textual.pilot import Pilot


async def wait_for(
    pilot: Pilot[int], condition: Callable[[], object], limit: float = 20.0, poll: float = 0.02
) -> None:
    """Until ``condition()`` holds, looking every ``poll`` seconds (``AssertionError`` past
    ``limit``); then until the app is idle, so that the screen shows what the condition saw
    (a notice's text is set before the screen that draws it is updated)."""
    deadline = asyncio.get_running_loop().time() + limit
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(poll)
    await pilot.pause()
