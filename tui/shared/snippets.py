"""A search hit's snippet as ``rich.text.Text`` (or plain, ``snippet_window``): the one way every drawing host (the ``@``
picker, the session list, ``dsh search``) shows a body match.

The snippet (``core.search.make_hit``) is already one safe line; its matched spans are
styled by offset, so no markup is ever parsed. Cut to a width in terminal cells, the
window keeps the first match in view.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tui.shared.cells import cell_len, take_cells

if TYPE_CHECKING:
    from rich.text import Text

__all__ = ["MATCH_STYLE", "snippet_text", "snippet_window"]

MATCH_STYLE = "bold underline not dim"
"""How a matched word is marked (on top of the row's own colours)."""


def snippet_window(
    snippet: str, spans: Sequence[tuple[int, int]], width: int
) -> tuple[str, list[tuple[int, int]]]:
    """``snippet`` within ``width`` cells (``…`` at a cut end), the window keeping the first
    match in view, and its ``spans`` moved into that text (those cut off dropped): what
    ``snippet_text`` draws, as plain text (``dsh search`` into a pipe)."""
    start = 0
    if spans and width > 2:
        first_start, first_end = spans[0]
        # Drop characters from the start until the first match ends within the width
        # (one cell kept for the ellipsis of a cut end).
        while start < first_start and cell_len("…" + snippet[start:first_end]) > width - 1:
            start += 1
    head = "…" if start > 0 else ""
    rest = snippet[start:]
    shift = len(head) - start
    room = max(0, width - cell_len(head))
    if cell_len(rest) > room:
        kept = take_cells(rest, max(0, room - 1))
        body = kept + "…"
    else:
        kept = rest
        body = rest
    limit = len(head) + len(kept)
    moved: list[tuple[int, int]] = []
    for a, b in spans:
        a, b = max(a + shift, len(head)), min(b + shift, limit)
        if a < b:
            moved.append((a, b))
    return head + body, moved


def snippet_text(
    snippet: str,
    spans: Sequence[tuple[int, int]],
    width: int,
    *,
    style: str = "",
    match_style: str = MATCH_STYLE,
) -> Text:
    """``snippet`` within ``width`` cells (``…`` at a cut end), its ``spans`` in
    ``match_style``, the rest in ``style`` (see ``snippet_window``)."""
    from rich.text import Text

    shown, moved = snippet_window(snippet, spans, width)
    text = Text(shown, style=style, no_wrap=True, overflow="ellipsis", end="")
    for a, b in moved:
        text.stylize(match_style, a, b)
    return text
