"""The progress line of a long store upgrade (indexing an existing database's messages for
search, issue 18) on a terminal: hosts without a screen of their own (the CLI) hand
``terminal_progress()`` to ``open_runtime``; the TUI shows the same words in its notice."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

__all__ = ["indexing_words", "terminal_progress"]


def indexing_words(done: int, total: int) -> str:
    """What the user reads while an upgraded database's sessions are indexed."""
    return f"Indexing messages for search: {done:,} of {total:,} sessions"


def terminal_progress(stream: TextIO | None = None) -> Callable[[int, int], None] | None:
    """A progress callback that redraws one line on ``stream`` (stderr), or ``None`` when
    it is not a terminal (a pipe or a log gets nothing). The line is cleared at the end."""
    out = sys.stderr if stream is None else stream
    try:
        if not out.isatty():
            return None
    except (AttributeError, ValueError):
        return None

    def show(done: int, total: int) -> None:
        out.write("\r\x1b[K" + ("" if done >= total else "dsh: " + indexing_words(done, total)))
        out.flush()

    return show
