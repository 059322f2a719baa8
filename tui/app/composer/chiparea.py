"""The composer's text area with mention chips: ``ChipArea``, the ``TextArea`` that
``Composer`` is.

A picked mention is one *chip* (its spans: :mod:`tui.app.composer.chips`): drawn ``@label``
with the URI hidden, the cursor never stops inside it, an edit (typed, deleted, Backspace
after it) takes it whole, and copy and cut give its full mention. Valid mentions are
highlighted (label, URI, chip: the ``composer--mention-*`` component classes), and characters
that must never reach the terminal raw are drawn visibly, one cell each.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, ClassVar

from rich.text import Text
from textual.actions import SkipAction
from textual.document._document import EditResult, Location, Selection
from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import TextArea

from core.display import mask_control
from core.references import (
    SESSION_REFERENCE_SCHEME,
    SessionReferenceSpan,
    find_session_reference_spans,
)
from tui.app.composer.chips import ChipSpan, ChipTable, snap, widen

__all__ = [
    "MENTION_CHIP_HIGHLIGHT",
    "MENTION_LABEL_HIGHLIGHT",
    "MENTION_URI_HIGHLIGHT",
    "ChipArea",
]

MENTION_LABEL_HIGHLIGHT = "dsh.mention.label"
MENTION_URI_HIGHLIGHT = "dsh.mention.uri"
MENTION_CHIP_HIGHLIGHT = "dsh.mention.chip"

# Characters that must never reach the terminal raw are drawn as one visible cell each (so
# columns keep matching the document): ``core.display.mask_control``, the one rule.
_visible_line = mask_control


class ChipArea(TextArea):
    """A ``TextArea`` whose picked mentions are chips (see the module docstring)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = TextArea.COMPONENT_CLASSES | {
        "composer--mention-label",
        "composer--mention-uri",
        "composer--mention-chip",
    }
    """``composer--mention-label``: the ``@[label]`` part of a mention;
    ``composer--mention-uri``: its ``(dsh-session:…)`` part; ``composer--mention-chip``: a
    picked mention, drawn as one ``@label`` unit."""

    def __init__(self, text: str = "", **options: Any) -> None:
        # TextArea.__init__ already moves the cursor and builds highlights: state first.
        self._reference_spans: list[SessionReferenceSpan] = []
        self._chips = ChipTable()
        super().__init__(text, **options)

    # A chip is one unit: the cursor never stops inside it and an edit takes it whole.

    def _chip_spans_on(self, row: int) -> list[ChipSpan]:
        if row >= self.document.line_count:
            return []
        return self._chips.spans(self.document.get_line(row))

    def _validate_selection(self, selection: Selection) -> Selection:
        selection = super()._validate_selection(selection)
        try:
            old = self.selection
        except AttributeError:  # during __init__
            return selection
        start, end = selection
        return Selection(self._snap(start, old.start), self._snap(end, old.end))

    def _snap(self, location: Location, before: Location) -> Location:
        row, column = location
        spans = self._chip_spans_on(row)
        if not spans:
            return location
        return (row, snap(column, spans, forward=location >= before))

    def _widen(self, start: Location, end: Location) -> tuple[Location, Location]:
        start, end = sorted((start, end))
        start_spans = self._chip_spans_on(start[0])
        end_spans = start_spans if end[0] == start[0] else self._chip_spans_on(end[0])
        low = widen(start[1], start[1], start_spans)[0]
        high = widen(end[1], end[1], end_spans)[1]
        return (start[0], low), (end[0], high)

    def _delete_via_keyboard(self, start: Location, end: Location) -> EditResult | None:
        return super()._delete_via_keyboard(*self._widen(start, end))

    def _replace_via_keyboard(
        self, insert: str, start: Location, end: Location
    ) -> EditResult | None:
        # Typed or pasted text never forges a chip; a pasted full mention becomes one.
        return super()._replace_via_keyboard(self._chips.chipify(insert), *self._widen(start, end))

    def action_copy(self) -> None:
        """Copy the selection with each chip as its full mention."""
        selected = self.selected_text
        if not selected:
            raise SkipAction()
        self.app.copy_to_clipboard(self._chips.expand(selected))

    def action_cut(self) -> None:
        """Cut (the selection, or the line) with each chip as its full mention."""
        if self.read_only:
            return
        start, end = self.selection
        if start == end:
            result = self._delete_cursor_line()
        else:
            result = self._delete_via_keyboard(start, end)
        if result is not None:
            self.app.copy_to_clipboard(self._chips.expand(result.replaced_text))

    def action_delete_left(self) -> None:
        """Backspace: a valid mention ending at the cursor goes as a whole."""
        if not self.read_only and self.selection.is_empty:
            line_starts = self._line_starts()
            row, col = self.cursor_location
            index = line_starts[row] + col
            for span in self._reference_spans:
                if span.end == index and span.valid and span.kind == "mention":
                    start_row = bisect_right(line_starts, span.start) - 1
                    start = (start_row, span.start - line_starts[start_row])
                    self._delete_via_keyboard(start, self.cursor_location)
                    return
        super().action_delete_left()

    # ------------------------------------------------------------------ rendering

    def get_line(self, line_index: int) -> Text:
        """The line as drawn: control, bidi and surrogate characters made visible."""
        return Text(self._display_line(line_index), end="", no_wrap=True)

    def _display_line(self, row: int) -> str:
        """Row ``row`` as drawn: each chip opener as ``@``, unsafe characters made visible
        (one character each, so columns match the document)."""
        return _visible_line(self._chips.display(self.document.get_line(row)))

    def _build_highlight_map(self) -> None:
        """Add highlight ranges for each valid mention (private TextArea API, pinned)."""
        super()._build_highlight_map()
        text = self.text
        draft = self._chips.expand(text)
        if "@[" not in draft and SESSION_REFERENCE_SCHEME not in draft:
            self._reference_spans = []
            return
        self._reference_spans = find_session_reference_spans(draft)
        line_starts = self._line_starts()
        for row in range(self.document.line_count):
            for chip in self._chip_spans_on(row):
                start = line_starts[row]
                self._add_highlight(
                    line_starts, start + chip.start, start + chip.end, MENTION_CHIP_HIGHLIGHT
                )
        raw_spans = (
            find_session_reference_spans(text)
            if "@[" in text or SESSION_REFERENCE_SCHEME in text
            else []
        )
        for span in raw_spans:
            if not span.valid:
                continue
            if span.kind == "mention":
                uri_start = span.end - len(span.uri) - 2  # "(" + uri + ")"
                self._add_highlight(line_starts, span.start, uri_start, MENTION_LABEL_HIGHLIGHT)
                self._add_highlight(line_starts, uri_start, span.end, MENTION_URI_HIGHLIGHT)
            else:
                self._add_highlight(line_starts, span.start, span.end, MENTION_LABEL_HIGHLIGHT)

    def _line_starts(self) -> list[int]:
        """Character offset in ``self.text`` at which each document row starts."""
        document = self.document
        newline = len(document.newline)
        starts: list[int] = []
        offset = 0
        for row in range(document.line_count):
            starts.append(offset)
            offset += len(document.get_line(row)) + newline
        return starts

    def _add_highlight(self, line_starts: list[int], start: int, end: int, name: str) -> None:
        """Highlight ``text[start:end]`` (character offsets) as UTF-8 byte columns per row."""
        row = bisect_right(line_starts, start) - 1
        while row < len(line_starts) and line_starts[row] < end:
            line = self._display_line(row)
            first = max(start - line_starts[row], 0)
            last = min(end - line_starts[row], len(line))
            if last > first:
                byte_first = len(line[:first].encode("utf-8"))
                byte_last = len(line[:last].encode("utf-8"))
                self._highlights[row].append((byte_first, byte_last, name))
            row += 1

    def render_lines(self, crop: Region) -> list[Strip]:
        if not self.is_attached:
            # A composer just removed (the app quitting) can still be drawn from the
            # screen's last map, its component styles (the text area's too) already gone:
            # blank, as what will stand there next is drawn over it.
            return [Strip.blank(crop.width)] * crop.height
        theme = self._theme
        if theme is not None:
            label = self.get_component_rich_style("composer--mention-label", partial=True)
            uri = self.get_component_rich_style("composer--mention-uri", partial=True)
            # Not partial: the chip's translucent background is blended with the composer's.
            chip = self.get_component_rich_style("composer--mention-chip")
            styles = theme.syntax_styles
            if (
                styles.get(MENTION_LABEL_HIGHLIGHT) != label
                or styles.get(MENTION_URI_HIGHLIGHT) != uri
                or styles.get(MENTION_CHIP_HIGHLIGHT) != chip
            ):
                # A new dict: the theme object's own dict is shared with the builtin theme.
                theme.syntax_styles = {
                    **styles,
                    MENTION_LABEL_HIGHLIGHT: label,
                    MENTION_URI_HIGHLIGHT: uri,
                    MENTION_CHIP_HIGHLIGHT: chip,
                }
        return super().render_lines(crop)
