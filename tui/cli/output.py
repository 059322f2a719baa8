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
from tui.cli.hitlines import (
    ID_CELLS,
    LABEL_CELLS,
    PIPE_WIDTH,
    SNIPPET_CELLS,
    SearchRow,
    search_cells,
)
from tui.shared.cells import cell_len, cut_cells
from tui.shared.snippets import MATCH_STYLE
from tui.shared.theme import THEME

__all__ = [
    "aligned_table",
    "console",
    "print_aligned",
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
    head: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int | None,
    *,
    shrink: Sequence[int] = (),
) -> list[Text]:
    """The rows of ``dsh sessions`` (already escaped) in aligned columns, one line each. An
    id (first column) is never cut or folded; within ``width`` the title (second) and then
    the cwd (third) are cut with an ellipsis instead, and so are the columns in ``shrink``
    (the fork origin: a quarter of the room left at most, more when the title and the cwd
    need less). The other columns (the age, the profile, the owner) are kept whole."""
    widths = [max(cell_len(row[i]) for row in [head, *rows]) for i in range(len(head))]
    gap = 2
    extra = [i for i in shrink if i > 2]
    if width is not None and sum(widths) + gap * (len(widths) - 1) > width:
        kept = [i for i in range(3, len(widths)) if i not in extra]
        spare = width - gap * (len(widths) - 1) - widths[0] - sum(widths[i] for i in kept)
        wanted = {i: widths[i] for i in extra}
        for i in extra:
            widths[i] = min(wanted[i], max(12, spare // (4 * len(extra))))
        spare -= sum(widths[i] for i in extra)
        cwd = min(widths[2], max(12, spare - widths[1]), max(spare // 2, 12))
        widths[1] = max(min(widths[1], spare - cwd), 8)
        widths[2] = max(min(widths[2], spare - widths[1]), 8)
        left = spare - widths[1] - widths[2]
        for i in extra:  # what the title and the cwd did not need
            more = max(0, min(wanted[i] - widths[i], left))
            widths[i] += more
            left -= more
    lines: list[Text] = []
    for index, row in enumerate([head, *rows]):
        cells = [
            row[0],
            cut_cells(row[1], widths[1]),
            cut_cells(row[2], widths[2], keep_end=True),
            *(
                cut_cells(cell, widths[i]) if i in extra else cell
                for i, cell in enumerate(row)
                if i > 2
            ),
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


def print_session_table(
    head: Sequence[str], rows: Sequence[Sequence[str]], *, shrink: Sequence[int] = ()
) -> None:
    """The table on a terminal, fitted to its width (a pipe gets tab-separated rows from
    ``dsh sessions`` itself: padding every row to the widest cell of the listing made one
    20 MB cwd a 10 GB file)."""
    out = console(sys.stdout)
    width = out.width if sys.stdout.isatty() else None
    for line in session_table(head, rows, width, shrink=shrink):
        out.print(line, soft_wrap=True)  # never folded: a long row runs on


def aligned_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[Text]:
    """Short rows (already escaped) in aligned columns under a bold header, nothing cut."""
    widths = [max(cell_len(row[i]) for row in [head, *rows]) for i in range(len(head))]
    lines: list[Text] = []
    for index, row in enumerate([head, *rows]):
        line = Text(style="bold" if index == 0 else "")
        for column, cell in enumerate(row):
            line.append(cell)
            line.append(" " * (widths[column] - cell_len(cell) + 2))
        line.rstrip()
        lines.append(line)
    return lines


def print_aligned(head: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """``aligned_table`` on standard output (``dsh profiles`` on a terminal)."""
    out = console(sys.stdout)
    for line in aligned_table(head, rows):
        out.print(line, soft_wrap=True)


def search_table(
    rows: Sequence[SearchRow],
    *,
    label_cells: int = LABEL_CELLS,
    snippet_cells: int = SNIPPET_CELLS,
) -> Table:
    """The hits of ``dsh search``, best first: the session (its title, or its id), the
    message's seq and the snippet with the matched words marked. Every text is escaped
    (``hitlines.search_cells``) and drawn as ``Text``, never markup."""
    table = Table(box=None, pad_edge=False, header_style="bold", show_edge=False)
    table.add_column("session", no_wrap=True, overflow="ellipsis", max_width=label_cells)
    table.add_column("id", no_wrap=True, overflow="ellipsis", max_width=ID_CELLS, style="dim")
    table.add_column("#", justify="right", no_wrap=True, style="dim", min_width=_seq_cells(rows))
    table.add_column("message", no_wrap=True, overflow="ellipsis")
    for row in rows:
        label, shown_id, seq, snippet, spans = search_cells(row, label_cells, snippet_cells)
        text = Text(snippet, no_wrap=True, overflow="ellipsis", end="")
        for a, b in spans:
            text.stylize(MATCH_STYLE, a, b)
        table.add_row(Text(label), Text(shown_id), Text(seq), text)
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
        out.width = PIPE_WIDTH
        out.print(search_table(rows))
        return
    room = out.width - ID_CELLS - _seq_cells(rows) - 6  # the id, the seq, three gaps of two
    label = min(LABEL_CELLS, max(12, room - SNIPPET_CELLS))
    snippet = max(12, min(SNIPPET_CELLS, room - label))
    out.print(search_table(rows, label_cells=label, snippet_cells=snippet))


def print_transcript(
    header: SessionHeader, title: str | None, events: Iterable[Event], *, expand: bool
) -> None:
    """A session's surface on standard output: wrapped to a terminal with indented
    continuation lines; into a pipe or a file nothing wrapped and no trailing spaces.
    ``events`` are drawn and printed one at a time (a session of any size is printed in
    the memory of one item, when they are read as they come: ``core.paging``)."""
    # The renderer (markdown_it) loads for a transcript only, never for a table.
    from tui.shared.render import UNWRAPPED_WIDTH, iter_render_transcript, plain_lines

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
