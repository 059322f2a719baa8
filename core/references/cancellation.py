"""Run reads concurrently, stop at the first failure or when a cancel event is set.

Whatever happens (success, failure, event, or the caller's task being cancelled) no task
is left pending and no exception is left unretrieved.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

__all__ = ["CancelRequested", "TaskFailed", "gather_cancellable"]

T = TypeVar("T")


class CancelRequested(Exception):
    """The cancel event was set before every awaitable finished."""


class TaskFailed(Exception):
    """Awaitable number ``index`` failed; ``__cause__`` is its exception."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


def _cancel_set(cancel: asyncio.Event | None) -> bool:
    return cancel is not None and cancel.is_set()


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # mark as retrieved; the caller decides what to do with it


async def gather_cancellable(
    factories: Sequence[Callable[[], Awaitable[T]]], cancel: asyncio.Event | None
) -> list[T]:
    """Start every awaitable before awaiting any; return their results in order.

    Raises ``CancelRequested`` if ``cancel`` is (or becomes) set first, or ``TaskFailed``
    (chained to the cause) for the first failure, in input order among those seen.
    """
    if _cancel_set(cancel):
        raise CancelRequested

    async def run(factory: Callable[[], Awaitable[T]]) -> T:
        return await factory()

    tasks = [asyncio.ensure_future(run(f)) for f in factories]
    for task in tasks:
        task.add_done_callback(_retrieve)
    watcher = asyncio.ensure_future(cancel.wait()) if cancel is not None else None
    everything: list[asyncio.Future[Any]] = [*tasks]
    if watcher is not None:
        everything.append(watcher)
    try:
        pending: set[asyncio.Future[Any]] = set(everything)
        while not all(task.done() for task in tasks):
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if watcher is not None and (watcher.done() or _cancel_set(cancel)):
                raise CancelRequested
            for index, task in enumerate(tasks):
                if task.done() and (task.cancelled() or task.exception() is not None):
                    cause = asyncio.CancelledError() if task.cancelled() else task.exception()
                    raise TaskFailed(index) from cause
        if _cancel_set(cancel):
            raise CancelRequested
        return [task.result() for task in tasks]
    finally:
        leftovers = [f for f in everything if not f.done()]
        for f in leftovers:
            f.cancel()
        if leftovers:
            await asyncio.wait(leftovers)
