"""The state the transcript's parts share (``loading``, ``tail``, ``paging``, mixed into the
``Transcript`` widget), declared once: the entries read so far, the mounted widgets, what is
still unread and how it is read. ``Transcript.__init__`` sets it up and says what each holds.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from textual.await_complete import AwaitComplete
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button

from core.errors import DshError
from tui.app.transcript.entries import Entry, FetchEvents, FetchSeqs, FetchUnknown
from tui.app.transcript.history import ForkBanner
from tui.app.transcript.reply import ReplyView

__all__ = ["TranscriptState"]

if TYPE_CHECKING:
    _ScrollBase = VerticalScroll
else:  # a plain mixin: Textual takes CSS and bindings from DOMNode bases only
    _ScrollBase = object


class TranscriptState(_ScrollBase):
    """The base of the transcript's parts: the state and methods they use of each other."""

    # The transcript's state (set up in ``Transcript.__init__``; see the comments there).
    page_size: int
    max_mounted: int
    _entries: list[Entry]
    _widgets: list[Widget]
    _first: int
    _unread: list[int]
    _fetch: FetchEvents | None
    _fetch_unknown: FetchUnknown | None
    _unknown_floor: int
    _unknown_low: int
    _unknown_through: int | None
    _counted: bool
    _fetch_seqs: FetchSeqs | None
    _counting: AwaitComplete | None
    _generation: int
    _fetching: int | None
    _known_seqs: set[int]
    _reply: ReplyView | None
    _button: Button
    _origin: ForkBanner

    if TYPE_CHECKING:  # the transcript's own, used by its parts

        @property
        def following(self) -> bool: ...

        def _tracked(self, work: Awaitable[None]) -> AwaitComplete: ...

        def _update_chrome(self) -> None: ...

        def _make_widget(self, entry: Entry) -> Widget: ...

        def _load_failed(self, error: DshError) -> Message: ...

        def _earlier_loaded(self, count: int, remaining: int) -> Message: ...

        # paging's, used by loading and the tail

        def _prune(self) -> Awaitable[Any] | None: ...

        async def _count_later(
            self, generation: int, fetch_seqs: FetchSeqs, page: AwaitComplete
        ) -> None: ...
