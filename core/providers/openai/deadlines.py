"""Waiting on the server under the caller's cancel event and the reply's deadline, the
work always run to its end before the wait returns."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

_T = TypeVar("_T")


class _Cancelled(Exception):
    """The caller's cancel event fired while we were waiting."""


class _DeadlineReached(Exception):
    """``reply_timeout`` passed while we were waiting."""


async def _next_before(
    awaitable: Awaitable[_T], cancel: asyncio.Event | None, deadline: float
) -> _T:
    """Await ``awaitable``; cancel it and raise ``_Cancelled`` once ``cancel`` is set, or
    ``_DeadlineReached`` once the loop clock passes ``deadline``.

    The awaitable always runs to its end (result, error or cancellation) before we return,
    so a generator behind it is never left running.
    """
    loop = asyncio.get_running_loop()
    remaining = deadline - loop.time()
    if remaining <= 0:
        if asyncio.iscoroutine(awaitable):
            awaitable.close()
        raise _DeadlineReached
    task = asyncio.ensure_future(awaitable)
    waiter = asyncio.ensure_future(cancel.wait()) if cancel is not None else None
    try:
        await asyncio.wait(
            {task} if waiter is None else {task, waiter},
            timeout=remaining,
            return_when=asyncio.FIRST_COMPLETED,
        )
    except BaseException:
        task.cancel()
        await asyncio.wait({task})
        _forget(task)
        raise
    finally:
        if waiter is not None:
            waiter.cancel()
    if task.done():
        return task.result()
    task.cancel()
    await asyncio.wait({task})
    _forget(task)  # we stop waiting; whatever the work ended with is moot
    if cancel is not None and cancel.is_set():
        raise _Cancelled
    raise _DeadlineReached


def _forget(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # mark it retrieved so asyncio does not log it
