"""The progress line of a long store upgrade on a terminal, shared by every store and host:
folding existing surfaces into their nodes (issue 15) and indexing existing messages for
search (issue 18). One line on stderr, rewritten in place; only counts are printed (no path
or URL: the user's text)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

__all__ = ["folding_words", "indexing_words", "terminal_progress"]


def folding_words(done: int, total: int) -> str:
    """While an upgrade folds the surfaces of an existing database (rows)."""
    percent = done * 100 // max(total, 1)
    return f"upgrading the database: {percent}% ({done:,} of {total:,} surface events)"


def indexing_words(done: int, total: int) -> str:
    """While an upgraded database's sessions are indexed for search."""
    return f"Indexing messages for search: {done:,} of {total:,} sessions"


def terminal_progress(
    words: Callable[[int, int], str] = folding_words, stream: TextIO | None = None
) -> Callable[[int, int], None] | None:
    """``report(done, total)`` redrawing one line ``dsh: <words>`` on ``stream`` (default:
    the process's own stderr), cleared at the end; ``None`` unless that is a terminal. By
    default also ``None`` while stderr is captured (e.g. by a running Textual app, whose
    screen the line would break)."""
    if stream is None:
        original = sys.__stderr__
        if original is None or sys.stderr is not original:
            return None
        stream = original
    out = stream
    try:
        if not out.isatty():
            return None
    except (AttributeError, ValueError):
        return None

    def report(done: int, total: int) -> None:
        # A plain carriage return (no escape sequence): each line is at least as long as
        # the one before, as the counts only grow.
        out.write(f"\rdsh: {words(done, total)}" + ("\n" if done >= total else ""))
        out.flush()

    return report
