"""What ``dsh sessions`` and ``dsh show`` draw, with Rich: loaded only by those commands, so
the rest of the CLI (and ``dsh acp``, which starts through it) never imports Rich."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from core.display import single_line
from core.log import Event, SessionHeader
from tui.shared.cells import cell_len, cut_cells
from tui.shared.render import THEME, UNWRAPPED_WIDTH, iter_render_transcript, plain_lines
from tui.shared.snippets import snippet_text

__all__ = [
    "console",
    "print_search_hits",
    "print_session_table",
    "print_transcript",
    "search_table",
    "session_table",
]


def console(stream: TextIO) -> Console:
    """A console that prints text as it is: no markup, highlighting or emoji codes."""
    return Console(
        file=stream, highlight=False, markup=False, emoji=False, soft_wrap=False, theme=THEME
    )


def session_table(
    head: Sequence[str], rows: Sequence[Sequence[str]], width: int | None
) -> list[Text]:
    """The rows of ``dsh sessions`` (already escaped) in aligned columns, one line each. An
    id (first column) is never cut or folded; within ``width`` the title (second) and then
    the cwd (third) are cut with an ellipsis instead. Columns after the fourth (the owner)
    are kept whole."""
    widths = [max(cell_len(row[i]) for row in [head, *rows]) for i in range(len(head))]
    gap = 2
    if width is not None and sum(widths) + gap * (len(widths) - 1) > width:
        spare = width - gap * (len(widths) - 1) - widths[0] - sum(widths[3:])
        cwd = min(widths[2], max(12, spare - widths[1]), max(spare // 2, 12))
        widths[1] = max(min(widths[1], spare - cwd), 8)
        widths[2] = max(min(widths[2], spare - widths[1]), 8)
    lines: list[Text] = []
    for index, row in enumerate([head, *rows]):
        cells = [
            row[0],
            cut_cells(row[1], widths[1]),
            cut_cells(row[2], widths[2], keep_end=True),
            *row[3:],  # the age (and the owner, when some sessions are another's)
        ]
        line = Text(style="bold" if index == 0 else "")
        for column, cell in enumerate(cells):
            last = column == len(cells) - 1
            pad = "" if last else " " * (widths[column] - cell_len(cell) + gap)
            style = "dim" if column >= 2 and index else ""
            line.append(cell, style=style)
            line.append(pad)
        line.rstrip()
        lines.append(line)
    return lines


def print_session_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """The table on a terminal, fitted to its width (a pipe gets tab-separated rows from
    ``dsh sessions`` itself: padding every row to the widest cell of the listing made one
    20 MB cwd a 10 GB file)."""
    out = console(sys.stdout)
    width = out.width if sys.stdout.isatty() else None
    for line in session_table(head, rows, width):
        out.print(line, soft_wrap=True)  # never folded: a long row runs on


SearchRow = tuple[str, str, int, str, Sequence[tuple[int, int]]]
"""One ``dsh search`` hit: label (title or id), session id, seq, snippet, matched spans."""

_LABEL_CELLS = 30
_SNIPPET_CELLS = 80


def search_table(
    rows: Sequence[SearchRow],
    *,
    label_cells: int = _LABEL_CELLS,
    snippet_cells: int = _SNIPPET_CELLS,
) -> Table:
    """The hits of ``dsh search``, best first: the session (its title, or its id), the
    message's seq and the snippet with the matched words marked. Every text is escaped
    (``single_line``; the snippet is already safe) and drawn as ``Text``, never markup."""
    table = Table(box=None, pad_edge=False, header_style="bold", show_edge=False)
    table.add_column("session", no_wrap=True, overflow="ellipsis", max_width=label_cells)
    table.add_column("id", no_wrap=True, overflow="ellipsis", max_width=14, style="dim")
    table.add_column("#", justify="right", no_wrap=True, style="dim", min_width=_seq_cells(rows))
    table.add_column("message", no_wrap=True, overflow="ellipsis")
    for label, session_id, seq, snippet, spans in rows:
        shown_id = "" if session_id == label else single_line(session_id)
        table.add_row(
            Text(cut_cells(single_line(label), label_cells)),
            Text(cut_cells(shown_id, 14)),
            Text(str(seq)),
            snippet_text(snippet, spans, snippet_cells),
        )
    return table


def _seq_cells(rows: Sequence[SearchRow]) -> int:
    return max([1, *(len(str(row[2])) for row in rows)])


def print_search_hits(rows: Sequence[SearchRow]) -> None:
    """``search_table`` on standard output (a pipe gets the full width of every row). On a
    terminal narrower than the full table the title, then the snippet, are cut to fit (the
    snippet keeping its first match in view), never the id or the seq: Rich squeezed the
    seq to nothing below ~130 columns and cropped the snippet, matched words included."""
    out = console(sys.stdout)
    if not sys.stdout.isatty():
        out.width = _LABEL_CELLS + 14 + 8 + _SNIPPET_CELLS + 6
        out.print(search_table(rows))
        return
    room = out.width - 14 - _seq_cells(rows) - 6  # the id, the seq, three gaps of two
    label = min(_LABEL_CELLS, max(12, room - _SNIPPET_CELLS))
    snippet = max(12, min(_SNIPPET_CELLS, room - label))
    out.print(search_table(rows, label_cells=label, snippet_cells=snippet))


def print_transcript(
    header: SessionHeader, title: str | None, events: Iterable[Event], *, expand: bool
) -> None:
    """A session's surface on standard output: wrapped to a terminal with indented
    continuation lines; into a pipe or a file nothing wrapped and no trailing spaces.
    ``events`` are drawn and printed one at a time (a session of any size is printed in
    the memory of one item, when they are read as they come: ``core.paging``)."""
    out = console(sys.stdout)
    head = Text(single_line(title if title else header.id), style="bold")
    head.append(f"  ({single_line(header.id)}", style="dim")
    head.append(
        f" · {single_line(header.cwd)})" if header.cwd is not None else " · no cwd)", style="dim"
    )
    tty = sys.stdout.isatty()

    def emit(renderable: Any) -> None:
        if tty:
            out.print(renderable)
            return
        for line in plain_lines(out, renderable, UNWRAPPED_WIDTH):
            sys.stdout.write(line + "\n")

    emit(head)
    emit(Text(""))
    shown = False
    for renderable in iter_render_transcript(events, expand_cards=expand, wrap=tty):
        shown = True
        emit(renderable)
    if not shown:
        emit(Text("(no messages yet)", style="dim"))
