"""Text measured in terminal cells, not code points: a CJK character or an emoji takes two.

Measured as Rich measures it (``rich.cells``, loaded only for text beyond printable ASCII).
Used wherever a column must fit (the ``@`` picker's rows, ``dsh sessions``' table). The text
given is already safe (``core.display``); a cut re-applies the one rule, since it can orphan
an emoji's zero-width joiner or variation selector.
"""

from __future__ import annotations

import re

from core.display import single_line

__all__ = ["cell_len", "cut_cells", "take_cells"]


NARROW = "…—"
"""The characters beyond ASCII that dsh itself writes into cells (a cut's ellipsis, the
dash of a missing value): one cell each, as Rich counts them (a test checks)."""
_BEYOND_NARROW = re.compile(f"[^\x20-\x7e{NARROW}]")


def cell_len(text: str) -> int:
    """``rich.cells.cell_len``: the cells ``text`` takes on a terminal. Printable ASCII and
    ``NARROW`` (one cell a character, as Rich counts them too) are measured without
    loading Rich's width tables, so that a command printing such text never loads Rich."""
    if (text.isascii() and text.isprintable()) or _BEYOND_NARROW.search(text) is None:
        return len(text)
    from rich.cells import cell_len as rich_cell_len

    return rich_cell_len(text)


def take_cells(text: str, width: int, *, keep_end: bool = False) -> str:
    """The longest start (or end, with ``keep_end``) of ``text`` within ``width`` cells."""
    chars = reversed(text) if keep_end else iter(text)
    kept: list[str] = []
    used = 0
    for char in chars:
        size = cell_len(char)
        if used + size > width:
            break
        kept.append(char)
        used += size
    return "".join(reversed(kept)) if keep_end else "".join(kept)


def cut_cells(text: str, width: int, *, keep_end: bool = False) -> str:
    """``text`` within ``width`` cells, cut with an ellipsis when it does not fit: at its end,
    or at its start with ``keep_end`` (a path's last parts say most)."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return "…"[: max(width, 0)]
    if keep_end:
        return single_line("…" + take_cells(text, width - 1, keep_end=True).lstrip())
    return single_line(take_cells(text, width - 1).rstrip() + "…")
