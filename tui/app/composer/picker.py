"""The ``@`` mention picker: a small overlay list of sessions shown next to the composer cursor.

The picker never takes focus. Its owner (the :class:`tui.composer.Composer`) routes
Up/Down/Enter/Tab/Esc to it and places it on the screen; a mouse click on a row posts
:class:`MentionPicker.Picked` to the owner. Every piece of session data (title, id, cwd)
is untrusted: it goes through ``single_line`` and is rendered as ``rich.text.Text``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.message_pump import MessagePump
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

import core.log
from core.display import relative_age, single_line
from core.references import SessionDiscovery, SessionReferenceCandidate
from core.search import SearchHit
from tui.app.composer.mentions import at_limit
from tui.shared.cells import cell_len, cut_cells
from tui.shared.snippets import snippet_text

__all__ = [
    "LOOKUP_FAILED_HINT",
    "NO_MATCHES_HINT",
    "MentionPicker",
    "format_candidate_row",
]


def _wall_clock_ms() -> int:
    """``core.log.now_ms`` looked up at call time (so a test can patch it)."""
    return core.log.now_ms()


LOOKUP_FAILED_HINT = "Could not list sessions — keep typing or press Esc"
NO_MATCHES_HINT = "No matching sessions"
SEARCHING_HINT = "Searching…"

VISIBLE_ROWS = 8
"""Rows shown at once; more scroll."""

# Column widths of one row (cells): label, id, cwd, age, separated by two spaces.
_LABEL_W = 28
_ID_W = 14
_CWD_W = 24
_AGE_W = 8
ROW_WIDTH = _LABEL_W + _ID_W + _CWD_W + _AGE_W + 6


def _cell(text: str, width: int, *, keep_end: bool = False) -> str:
    """``text`` (already safe) cut to ``width`` cells with an ellipsis and padded to it.

    Measured in terminal cells, not code points: a CJK character or an emoji takes two.
    """
    if width <= 0:
        return ""
    text = cut_cells(text, width, keep_end=keep_end)
    return text + " " * max(0, width - cell_len(text))


def column_widths(row_width: int) -> tuple[int, int, int, int]:
    """Label, id, cwd and age widths for a row of ``row_width`` cells (separators included).

    The age is never cut; when the row is narrower than :data:`ROW_WIDTH` the cwd gives way
    first, then the id, then the label.
    """
    room = max(0, row_width - 6 - _AGE_W)
    widths = {"label": _LABEL_W, "id": _ID_W, "cwd": _CWD_W}
    excess = sum(widths.values()) - room
    for name, minimum in (("cwd", 8), ("id", 6), ("label", 6)):
        cut = max(0, min(excess, widths[name] - minimum))
        widths[name] -= cut
        excess -= cut
    return widths["label"], widths["id"], widths["cwd"], _AGE_W


def _unknown_activity(session_id: str) -> int | None:
    return None


def format_candidate_row(
    candidate: SessionReferenceCandidate,
    now: int,
    row_width: int = ROW_WIDTH,
    last_active: int | None = None,
    hit: SearchHit | None = None,
) -> Text:
    """One picker row: label, the id when it differs from the label, cwd, age; every column
    is cut and padded in terminal cells so rows line up whatever their characters. A
    session found by what was said in it (``hit``) shows the matching message's snippet,
    the matched words marked, in place of the id and cwd.

    The age is that of the session's last activity (``last_active``, its last event), as in
    the session list, or of its creation when it has no event yet."""
    label_w, id_w, cwd_w, age_w = column_widths(row_width)
    label = _cell(single_line(candidate.label), label_w)
    row = Text(no_wrap=True, overflow="ellipsis", end="")
    row.append(label, style="bold")
    row.append("  ")
    if hit is not None:
        width = id_w + 2 + cwd_w
        snippet = snippet_text(hit.snippet, hit.spans, width, style="dim")
        row.append_text(snippet)
        row.append(" " * max(0, width - snippet.cell_len))
    else:
        shown_id = (
            "" if candidate.session_id == candidate.label else single_line(candidate.session_id)
        )
        cwd = single_line(candidate.cwd) if candidate.cwd is not None else "no cwd"
        row.append(_cell(shown_id, id_w), style="dim")
        row.append("  ")
        row.append(
            _cell(cwd, cwd_w, keep_end=True),
            style="dim italic" if candidate.cwd is None else "dim",
        )
    row.append("  ")
    active_at = candidate.created_at if last_active is None else last_active
    row.append(relative_age(active_at, now).rjust(age_w), style="dim")
    return row


class _PickerList(OptionList, can_focus=False):
    """The rows; never focusable so the composer keeps focus while the mouse is used."""


class MentionPicker(Vertical, can_focus=False):
    """Overlay list of reference candidates with a header (reference count) and a hint line.

    ``owner`` receives :class:`MentionPicker.Picked` when a row is clicked. ``now_ms`` is
    the clock used for the relative ages (inject a fixed one in tests).
    """

    DEFAULT_CSS = """
    MentionPicker {
        position: absolute;
        overlay: screen;
        constrain: inside inside;
        width: 85;  /* ROW_WIDTH + border, padding and a scrollbar column */
        max-width: 100%;
        height: auto;
        display: none;
        background: $panel;
        border: round $accent;
        padding: 0 1;
        &.-open {
            display: block;
        }
        & > #picker-header {
            width: auto;
            height: auto;
            color: $text-muted;
        }
        & > #picker-header.-limit {
            color: $warning;
        }
        & > #picker-rows {
            width: 1fr;
            height: auto;
            max-height: 8;
            border: none;
            padding: 0;
            background: $panel;
            text-wrap: nowrap;
            text-overflow: ellipsis;
            scrollbar-size-vertical: 1;
        }
        & > #picker-rows > .option-list--option-highlighted {
            color: $block-cursor-foreground;
            background: $block-cursor-background;
            text-style: $block-cursor-text-style;
        }
        & > #picker-hint {
            width: auto;
            height: auto;
            color: $text-muted;
            text-style: italic;
            display: none;
        }
        & > #picker-hint.-shown {
            display: block;
        }
    }
    """

    class Picked(Message):
        """A row was clicked; ``index`` is its position in :attr:`MentionPicker.candidates`."""

        def __init__(self, picker: MentionPicker, index: int) -> None:
            super().__init__()
            self.picker = picker
            self.index = index

    def __init__(
        self,
        owner: MessagePump | None = None,
        *,
        now_ms: Callable[[], int] | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.owner = owner
        self.now_ms: Callable[[], int] = now_ms if now_ms is not None else _wall_clock_ms
        self.last_active_of: Callable[[str], int | None] = _unknown_activity
        """When a session was last active (its last event), for the rows' ages."""
        self._candidates: tuple[SessionReferenceCandidate, ...] = ()
        self._hits: tuple[SearchHit | None, ...] = ()
        self._header = Static(Text(""), id="picker-header", markup=False)
        self._rows = _PickerList(id="picker-rows")
        self._hint = Static(Text(""), id="picker-hint", markup=False)
        self._header_lines = 1
        self._hint_text = ""
        self._row_width = ROW_WIDTH

    def compose(self) -> ComposeResult:
        yield self._header
        yield self._rows
        yield self._hint

    # ------------------------------------------------------------------ state

    @property
    def is_open(self) -> bool:
        return self.has_class("-open")

    @property
    def candidates(self) -> tuple[SessionReferenceCandidate, ...]:
        """The rows currently listed, in display order."""
        return self._candidates

    @property
    def highlighted(self) -> int | None:
        """Index of the highlighted row, ``None`` when there are no rows."""
        return self._rows.highlighted

    @property
    def highlighted_candidate(self) -> SessionReferenceCandidate | None:
        index = self._rows.highlighted
        if index is None or not 0 <= index < len(self._candidates):
            return None
        return self._candidates[index]

    @property
    def hint(self) -> str:
        """The text of the hint line ("" when hidden)."""
        return self._hint_text

    @property
    def row_texts(self) -> list[str]:
        """Plain text of every row (for tests and accessibility tooling)."""
        out: list[str] = []
        for index in range(self._rows.option_count):
            prompt = self._rows.get_option_at_index(index).prompt
            out.append(prompt.plain if isinstance(prompt, Text) else str(prompt))
        return out

    @property
    def header_text(self) -> str:
        content = self._header.content
        return content.plain if isinstance(content, Text) else str(content)

    @property
    def expected_height(self) -> int:
        """Rows the picker takes on screen once laid out (border included)."""
        rows = min(len(self._candidates), VISIBLE_ROWS)
        hint = 1 if self._hint_text else 0
        return 2 + self._header_lines + rows + hint

    @property
    def expected_width(self) -> int:
        return self._row_width + 5  # border, padding and a scrollbar column (see DEFAULT_CSS)

    def fit_width(self, screen_width: int) -> None:
        """Lay rows out for a screen ``screen_width`` cells wide (the age column is never cut)."""
        row_width = max(20, min(ROW_WIDTH, screen_width - 5))
        if row_width != self._row_width:
            self._row_width = row_width
            if self._candidates:
                highlighted = self._rows.highlighted
                self._set_rows()
                self._rows.highlighted = highlighted

    def open(self) -> None:
        self.add_class("-open")

    def close(self) -> None:
        self.remove_class("-open")

    def set_header(self, reference_count: int, max_references: int) -> None:
        """Show "N of M references" and, at or over the limit, a warning line."""
        noun = "reference" if max_references == 1 else "references"
        header = Text(f"{reference_count} of {max_references} {noun}", end="")
        limited = at_limit(reference_count, max_references)
        if limited:
            header.append(f"\nLimit reached: {max_references} {noun} per message", style="bold")
        self._header_lines = 2 if limited else 1
        self._header.set_class(limited, "-limit")
        self._header.update(header)

    def show_searching(self) -> None:
        """A lookup is running and nothing has been listed yet."""
        if not self._candidates:
            self._set_hint(SEARCHING_HINT)

    @property
    def hits(self) -> tuple[SearchHit | None, ...]:
        """Beside each row of :attr:`candidates`: the message a body match was found by
        (``None``: a match by id, cwd or title)."""
        return self._hits

    def show_candidates(
        self, candidates: Sequence[SessionReferenceCandidate | SessionDiscovery]
    ) -> None:
        """Replace the rows (highlight on the first) in one update; never re-mounts widgets.
        A ``SessionDiscovery`` with a hit is drawn with its snippet."""
        rows = [
            (row.candidate, row.hit) if isinstance(row, SessionDiscovery) else (row, None)
            for row in candidates
        ]
        self._candidates = tuple(candidate for candidate, _ in rows)
        self._hits = tuple(hit for _, hit in rows)
        self._set_rows()
        self._rows.highlighted = 0 if self._candidates else None
        self._set_hint("" if self._candidates else NO_MATCHES_HINT)

    def _set_rows(self) -> None:
        now, width = self.now_ms(), self._row_width
        self._rows.set_options(
            Option(
                format_candidate_row(
                    candidate, now, width, self.last_active_of(candidate.session_id), hit
                )
            )
            for candidate, hit in zip(self._candidates, self._hits, strict=True)
        )

    def show_limit_refusal(self, max_references: int) -> None:
        """A pick was refused: the message already references ``max_references`` sessions."""
        noun = "reference" if max_references == 1 else "references"
        self._set_hint(
            f"Limit reached ({max_references} {noun} per message): remove one to add another"
        )

    def show_error(self) -> None:
        """The lookup failed: no rows, and a hint that typing or Esc go on working."""
        self._candidates = ()
        self._hits = ()
        self._rows.clear_options()
        self._set_hint(LOOKUP_FAILED_HINT)

    def move_highlight(self, delta: int) -> None:
        """Move the highlight by ``delta`` rows, wrapping around at both ends."""
        count = len(self._candidates)
        if not count:
            return
        current = self._rows.highlighted
        self._rows.highlighted = 0 if current is None else (current + delta) % count

    def _set_hint(self, hint: str) -> None:
        self._hint_text = hint
        self._hint.update(Text(hint, end=""))
        self._hint.set_class(bool(hint), "-shown")

    # ------------------------------------------------------------------ events

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        target = self.owner if self.owner is not None else self
        target.post_message(self.Picked(self, event.option_index))
