"""``dsh search``'s table of hits: on a terminal drawn by Rich (``output.search_table``),
into a pipe or a file written here without loading Rich, as the very text Rich writes
there (no styles, the columns at their widest at most ``PIPE_WIDTH``): the same cells
(``search_cells``), padded as Rich pads a table without a box (two spaces between columns,
the seq right-aligned, every line as wide as the table). A test compares the two on
random rows, CJK, emoji and hostile text included.

Rich is still used into a pipe when the environment tells it to write styles there
(``FORCE_COLOR``, ``TTY_COMPATIBLE``), or when Rich would crop or squeeze a cell: the
table would not fit ``PIPE_WIDTH`` (a seq of more than eight digits), or a cut cell is
wider than its column for Rich (``cut_cells`` measures character by character, Rich
measures an emoji sequence as a whole).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from itertools import pairwise

from core.display import single_line
from tui.shared.cells import cell_len, cut_cells
from tui.shared.snippets import snippet_window

__all__ = [
    "ID_CELLS",
    "LABEL_CELLS",
    "PIPE_WIDTH",
    "SNIPPET_CELLS",
    "SearchRow",
    "plain_pipe",
    "plain_search_table",
    "search_cells",
]

SearchRow = tuple[str, str, int, str, Sequence[tuple[int, int]]]
"""One ``dsh search`` hit: label (title or id), session id, seq, snippet, matched spans."""

LABEL_CELLS = 30
ID_CELLS = 14
SNIPPET_CELLS = 80
PIPE_WIDTH = LABEL_CELLS + ID_CELLS + 8 + SNIPPET_CELLS + 6
"""The width of the table into a pipe (room for a seq of eight digits)."""

_HEAD = ("session", "id", "#", "message")
_GAP = "  "  # Rich's padding of one cell on each inner side of a column
_RICH_ENV = ("FORCE_COLOR", "TTY_COMPATIBLE")
"""Variables under which Rich may write styles into a pipe: Rich draws then."""


def search_cells(
    row: SearchRow, label_cells: int, snippet_cells: int
) -> tuple[str, str, str, str, list[tuple[int, int]]]:
    """A hit's cells, escaped (``single_line``; the snippet is already safe) and cut: the
    session's label, its id (empty when the label is the id), the seq, the snippet's
    window, and the matched spans in that window."""
    label, session_id, seq, snippet, spans = row
    shown_id = "" if session_id == label else single_line(session_id)
    text, moved = snippet_window(snippet, spans, snippet_cells)
    return (
        cut_cells(single_line(label), label_cells),
        cut_cells(shown_id, ID_CELLS),
        str(seq),
        text,
        moved,
    )


def plain_search_table(rows: Sequence[SearchRow]) -> str | None:
    """The table into a pipe, as Rich writes it there; ``None`` when it would not fit
    ``PIPE_WIDTH`` (Rich draws it then)."""
    cells = [search_cells(row, LABEL_CELLS, SNIPPET_CELLS) for row in rows]
    table = [_HEAD, *(cell[:4] for cell in cells)]
    sizes = [[cell_len(cell) for cell in line] for line in table]
    widths = [max(size[i] for size in sizes) for i in range(4)]
    # Rich sizes a column by each cell's whole text, but pads a line by the sum of its
    # pieces, and a marked span cuts the snippet into pieces: a span ending inside a
    # character sequence ("0" of "0\ufe0f") makes the pieces narrower (or wider) than
    # the whole.
    drawn = [sizes[0][3], *(_pieces_cells(cell[3], cell[4]) for cell in cells)]
    if (
        sum(widths) + 3 * len(_GAP) > PIPE_WIDTH
        or widths[0] > LABEL_CELLS
        or widths[1] > ID_CELLS
        or widths[3] > SNIPPET_CELLS
        or max(drawn) > widths[3]
    ):
        # A cell Rich measures wider than its cut (an emoji sequence the cut split) or
        # a table too wide: Rich crops or squeezes it, so Rich draws it.
        return None
    out: list[str] = []
    for line, size, snippet_drawn in zip(table, sizes, drawn, strict=True):
        label, shown_id, seq, snippet = line
        out.append(
            label
            + " " * (widths[0] - size[0])
            + _GAP
            + shown_id
            + " " * (widths[1] - size[1])
            + _GAP
            + " " * (widths[2] - size[2])
            + seq
            + _GAP
            + snippet
            + " " * (widths[3] - snippet_drawn)
            + "\n"
        )
    return "".join(out)


def _pieces_cells(snippet: str, spans: Sequence[tuple[int, int]]) -> int:
    """The cells of ``snippet`` as Rich adds them up when it pads a line: piece by piece,
    the pieces cut at every edge of a marked span."""
    edges = sorted({0, len(snippet), *(i for span in spans for i in span)})
    return sum(cell_len(snippet[a:b]) for a, b in pairwise(edges))


def plain_pipe() -> bool:
    """Whether standard output gets the plain table: a pipe or a file, and Rich not told
    to style it (``FORCE_COLOR``, ``TTY_COMPATIBLE``)."""
    return not sys.stdout.isatty() and not any(name in os.environ for name in _RICH_ENV)
