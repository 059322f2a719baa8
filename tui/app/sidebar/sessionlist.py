"""A virtual list of sessions: every row is two lines, and only the rows in view are rendered.

Textual's ``OptionList`` measures every option whenever its options change, which costs
seconds with ten thousand sessions (and the sidebar changes on every open, filter keystroke
and rename). Rows of fixed height make the list's size a multiplication, so setting rows,
moving the highlight or marking the current session costs the same for 10 or 100,000 of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style as RichStyle
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

__all__ = ["ROW_HEIGHT", "SessionList", "SessionRow"]

ROW_HEIGHT = 2
"""Lines per row: the label, then the age and cwd."""

SessionRow = Callable[[int], tuple[Text, Text]]
"""Builds the two lines of row ``index`` for a given width (set with ``set_rows``)."""


class SessionList(ScrollView, can_focus=True):
    """Rows of two lines each, one highlighted; Enter or a click posts ``Selected``."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "session-list--row",
        "session-list--row-highlighted",
        "session-list--row-hover",
    }

    DEFAULT_CSS = """
    SessionList {
        height: 1fr;
        overflow-x: hidden;
        overflow-y: auto;
        background: transparent;
        color: $foreground;
        & > .session-list--row-highlighted {
            color: $foreground;
            background: $block-cursor-blurred-background;
        }
        & > .session-list--row-hover {
            background: $block-hover-background;
        }
        &:focus {
            background: $boost;
            & > .session-list--row-highlighted {
                color: $block-cursor-foreground;
                background: $block-cursor-background;
                text-style: $block-cursor-text-style;
            }
        }
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("down", "cursor_down", "Down", show=False),
        Binding("up", "cursor_up", "Up", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
        Binding("pagedown", "page_down", "Page Down", show=False),
        Binding("pageup", "page_up", "Page Up", show=False),
        Binding("enter", "select", "Select", show=False),
    ]

    highlighted: reactive[int | None] = reactive(None, always_update=True)
    """Index of the highlighted row (``None`` when the list is empty)."""

    class Selected(Message):
        """The user chose row ``index`` (Enter or a click)."""

        def __init__(self, session_list: SessionList, index: int) -> None:
            super().__init__()
            self.session_list = session_list
            self.index = index

        @property
        def control(self) -> SessionList:
            return self.session_list

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._count = 0
        self._row: SessionRow = lambda index: (Text(), Text())
        self._hover: int | None = None
        self._strips: dict[tuple[int, int, str, int], Strip] = {}

    # -- content -------------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return self._count

    def set_rows(self, count: int, row: SessionRow, highlighted: int | None = None) -> None:
        """Show ``count`` rows drawn by ``row`` and highlight one (the first by default)."""
        self._count = max(0, count)
        self._row = row
        self._hover = None
        self._strips.clear()
        self._resize_virtual()
        self.highlighted = (0 if self._count else None) if highlighted is None else highlighted
        self.refresh()

    def refresh_rows(self) -> None:
        """Draw the rows again (their content changed, not their number)."""
        self._strips.clear()
        self.refresh()

    def validate_highlighted(self, highlighted: int | None) -> int | None:
        if highlighted is None or not self._count:
            return None
        return min(max(0, highlighted), self._count - 1)

    def watch_highlighted(self, old: int | None, new: int | None) -> None:
        if new is not None:
            self.scroll_to_region(
                Region(0, new * ROW_HEIGHT, max(1, self.size.width), ROW_HEIGHT),
                animate=False,
                force=True,
                immediate=True,
            )
        self.refresh_rows()

    def _resize_virtual(self) -> None:
        self.virtual_size = Size(self.scrollable_content_region.width, self._count * ROW_HEIGHT)

    def notify_style_update(self) -> None:
        # A new theme (or any restyle) changes the colours the cached lines were drawn in.
        super().notify_style_update()
        self._strips.clear()

    def on_resize(self, event: events.Resize) -> None:
        self._strips.clear()
        self._resize_virtual()

    # -- drawing -------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        line_no = self.scroll_offset.y + y
        index, part = divmod(line_no, ROW_HEIGHT)
        if not 0 <= index < self._count:
            return Strip.blank(width, self.get_visual_style("session-list--row").rich_style)
        if index == self.highlighted:
            state = "session-list--row-highlighted"
        elif index == self._hover:
            state = "session-list--row-hover"
        else:
            state = ""
        strip = self._strips.get((index, part, state, width))
        if strip is None:  # draw both lines of the row: the other one is wanted next
            classes = ("session-list--row", state) if state else ("session-list--row",)
            style = self.get_visual_style(*classes).rich_style
            if len(self._strips) > 4096:
                self._strips.clear()
            for line_part, line in enumerate(self._row(index)):
                self._strips[(index, line_part, state, width)] = self._draw(line, width, style)
            strip = self._strips[(index, part, state, width)]
        return strip

    def _draw(self, line: Text, width: int, style: RichStyle) -> Strip:
        text = line.copy()
        text.no_wrap = True
        text.truncate(width, overflow="ellipsis")
        segments = Segment.apply_style(text.render(self.app.console), style)
        return Strip(list(segments)).extend_cell_length(width, style).crop(0, width)

    # -- input ---------------------------------------------------------------------------

    def _index_at(self, event: events.MouseEvent) -> int | None:
        offset = event.get_content_offset(self)
        if offset is None:
            return None
        index = (self.scroll_offset.y + offset.y) // ROW_HEIGHT
        return index if 0 <= index < self._count else None

    def on_click(self, event: events.Click) -> None:
        index = self._index_at(event)
        if index is not None:
            event.stop()
            self.highlighted = index
            self.action_select()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        index = self._index_at(event)
        if index != self._hover:
            self._hover = index
            self.refresh_rows()

    def on_leave(self, event: events.Leave) -> None:
        if self._hover is not None:
            self._hover = None
            self.refresh_rows()

    def _page(self) -> int:
        return max(1, self.scrollable_content_region.height // ROW_HEIGHT)

    def _move(self, delta: int) -> None:
        if self._count:
            current = self.highlighted
            self.highlighted = (
                (0 if delta > 0 else self._count - 1) if current is None else (current + delta)
            )

    def action_cursor_down(self) -> None:
        self._move(1)

    def action_cursor_up(self) -> None:
        self._move(-1)

    def action_page_down(self) -> None:
        self._move(self._page())

    def action_page_up(self) -> None:
        self._move(-self._page())

    def action_first(self) -> None:
        if self._count:
            self.highlighted = 0

    def action_last(self) -> None:
        if self._count:
            self.highlighted = self._count - 1

    def action_select(self) -> None:
        if self.highlighted is not None:
            self.post_message(self.Selected(self, self.highlighted))
