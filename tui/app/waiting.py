"""Waiting for the store's server when the app starts (a team database that is down or
restarting): the app says so, tries again every few seconds, and opens once it answers.

Textual-free: the app gives the opening and the telling; only a server that cannot be
reached now (``StoreUnreachableError``) is waited for. Anything else (a refused login, a
newer schema) is raised at once, as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from core.errors import StoreUnreachableError
from tui.shared.errors import describe_error

__all__ = ["RETRY_SECONDS", "open_when_reachable", "waiting_words"]

RETRY_SECONDS = 2.0
"""How often the app tries the server again while it waits for it."""

T = TypeVar("T")


def waiting_words(err: StoreUnreachableError, retry_seconds: float = RETRY_SECONDS) -> str:
    """The notice while waiting: what the server said, and that dsh keeps trying."""
    return (
        f"Waiting for the server: {describe_error(err)}. Trying again every "
        f"{retry_seconds:g} s; Ctrl+Q quits."
    )


async def open_when_reachable(
    open_once: Callable[[], Awaitable[T]],
    first: StoreUnreachableError,
    tell: Callable[[str], None],
    *,
    retry_seconds: float = RETRY_SECONDS,
) -> T:
    """``open_once()``'s result once the server answers, after ``first`` said it did not:
    ``tell`` gets the words to show now, and again whenever they change."""
    told = waiting_words(first, retry_seconds)
    tell(told)
    while True:
        await asyncio.sleep(retry_seconds)
        try:
            return await open_once()
        except StoreUnreachableError as err:
            words = waiting_words(err, retry_seconds)
            if words != told:
                told = words
                tell(words)
