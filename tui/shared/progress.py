"""The progress line of a long store upgrade (see ``stores.progress``): the CLI hands
``terminal_progress()`` (indexing words) to ``open_runtime``; the TUI shows the same words
in its notice."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from stores.progress import indexing_words
from stores.progress import terminal_progress as _terminal_progress

__all__ = ["indexing_words", "terminal_progress"]


def terminal_progress(stream: TextIO | None = None) -> Callable[[int, int], None] | None:
    """The search indexing's line on ``stream`` (stderr), or ``None`` off a terminal."""
    return _terminal_progress(indexing_words, stream)
