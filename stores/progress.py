"""The progress line of a long schema upgrade, shared by the SQLite and PostgreSQL stores."""

from __future__ import annotations

import sys
from collections.abc import Callable

__all__ = ["terminal_progress"]


def terminal_progress() -> Callable[[int, int], None] | None:
    """``report(done, total)`` writing one line on stderr, rewritten in place; ``None``
    unless stderr is the process's own terminal (not captured, e.g. by a running Textual
    app, whose screen it would break). Only counts are printed (no path or URL: the
    user's text)."""
    original = sys.__stderr__
    if original is None or sys.stderr is not original or not original.isatty():
        return None
    stream = original

    def report(done: int, total: int) -> None:
        percent = done * 100 // max(total, 1)
        end = "\n" if done >= total else ""
        stream.write(
            f"\rdsh: upgrading the database: {percent}% ({done:,} of {total:,} surface events)"
            + end
        )
        stream.flush()

    return report
