"""Waiting that stops early: one event for several (a host's interrupt or a lost
lease), work abandoned once an event is set, a sleep cut short."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Literal, TypeVar


class _AnyOf(asyncio.Event):
    """An event that is set whenever one of ``events`` is: a provider takes one cancel
    event, and a reply stops on the host's interrupt or on a lost lease. Both are seen at
    once (``is_set`` asks them), as the host's own event was before."""

    def __init__(self, *events: asyncio.Event) -> None:
        super().__init__()
        self._events = events

    def is_set(self) -> bool:
        return super().is_set() or any(event.is_set() for event in self._events)

    async def wait(self) -> Literal[True]:
        if self.is_set():
            return True
        waits = [asyncio.ensure_future(event.wait()) for event in self._events]
        waits.append(asyncio.ensure_future(super().wait()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()
        return True


_T = TypeVar("_T")


async def _unless_set(work: Awaitable[_T], event: asyncio.Event) -> _T | None:
    """``work``'s result, or ``None`` (``work`` cancelled and finished) once ``event`` is
    set first: a summary in flight when the lease is lost is not waited for."""
    task = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait((task, waiter), return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()
            await asyncio.wait((task,))
    if event.is_set():
        if not task.cancelled():
            task.exception()  # retrieved: a failure after the loss does not matter
        return None
    return task.result()


async def _sleep_unless(seconds: float, event: asyncio.Event | None) -> None:
    """Sleep ``seconds``, or less once ``event`` is set."""
    if event is None:
        await asyncio.sleep(seconds)
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)


# --------------------------------------------------------------------------- updates
