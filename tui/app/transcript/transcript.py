"""The transcript: a windowed replay of a session's current surface plus the streaming reply.

Only the newest ``page_size`` items are mounted; a "Load earlier messages" button at the
top mounts the previous page while keeping the view where it was (reading it from the store
first when the transcript was loaded from a surface window: ``paging``, whose arithmetic is
the plain ``window`` module). Assistant messages are Markdown
with raw HTML disabled, so ``</referenced-sessions>`` stays visible text: every reply body,
stored or streaming, is one ``Static`` rendering ``reply_body`` (Rich Markdown through
``LiteralMarkdown``), so a reply is laid out the same live and after a reload (a Textual
``Markdown`` widget tree per message is far too slow to mount by the dozen).
Every piece of stored text is untrusted: it is escaped with ``escape_control`` and shown as
``rich.text.Text`` (or parsed as Markdown without HTML), never as Textual/Rich markup.

The widget is put together from parts, each a mixin on the shared ``state``: ``loading``
(replacing everything with a surface), ``tail`` (new events, the streaming reply) and
``paging`` (earlier pages, pruning). Beside them: ``entries`` (the widget of each entry),
``messages`` (stored messages), ``reply`` (the streaming reply), ``text`` (what a message's
text shows as), ``cards``, ``history`` and ``navigation``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import ClassVar

from textual.app import ComposeResult
from textual.await_complete import AwaitComplete
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button

from core.errors import DshError
from core.log import Event, message_text
from tui.app.transcript.entries import (
    Entry,
    FetchEvents,
    FetchSeqs,
    FetchUnknown,
    entry_widget,
)
from tui.app.transcript.history import ForkBanner
from tui.app.transcript.loading import TranscriptLoading
from tui.app.transcript.messages import (
    EMPTY_STATE_TEXT,
    EMPTY_STATE_TITLE,
    AssistantMessage,
    EmptyState,
    UserMessage,
)
from tui.app.transcript.navigation import ITEM_BINDINGS, ItemNavigation
from tui.app.transcript.paging import TranscriptPaging
from tui.app.transcript.reply import FLUSH_INTERVAL, ReplyRecord, ReplyView, Status
from tui.app.transcript.tail import TranscriptTail
from tui.app.transcript.text import (
    MAX_SHOWN_CHARS,
    NO_TEXT,
    TimeFormat,
    as_mapping,
    checkpoint_text,
    format_time,
    last_assistant_text,
    reasoning_text,
    reply_body,
    tool_result_text,
)
from tui.app.transcript.window import load_earlier_label
from tui.shared.items import TranscriptItem
from tui.shared.lineage import ForkParent

__all__ = [
    "EMPTY_STATE_TEXT",
    "EMPTY_STATE_TITLE",
    "FLUSH_INTERVAL",
    "MAX_MOUNTED",
    "MAX_SHOWN_CHARS",
    "NO_TEXT",
    "PAGE_SIZE",
    "AssistantMessage",
    "EmptyState",
    "FetchEvents",
    "FetchSeqs",
    "FetchUnknown",
    "ReplyRecord",
    "ReplyView",
    "Status",
    "TimeFormat",
    "Transcript",
    "UserMessage",
    "checkpoint_text",
    "format_time",
    "last_assistant_text",
    "reasoning_text",
    "reply_body",
    "tool_result_text",
]

PAGE_SIZE = 24
"""Items mounted on open and by each "Load earlier messages"."""
MAX_MOUNTED = 200
"""While following the tail, older items beyond this many are unmounted (they can be
loaded again); keeps a long live session as light as a freshly opened one."""

FOUND_MARK_S = 3.0
"""How long an item opened from a search hit stays marked (seconds)."""


class Transcript(
    TranscriptLoading, TranscriptTail, TranscriptPaging, ItemNavigation, VerticalScroll
):
    """The scrollable transcript of one session (see the module docstring)."""

    BINDINGS: ClassVar[list[BindingType]] = ITEM_BINDINGS

    # The transcript and its items (messages in messages.py and reply.py, folds and cards in
    # cards.py): a reusable widget's styles travel with it, whichever app or screen mounts it.
    DEFAULT_CSS = """
    Transcript {
        height: 1fr;
        padding: 0 1;
        scrollbar-gutter: stable;
    }

    Transcript > .-found {
        background: $accent 25%;
    }

    Transcript > #load-earlier {
        width: 100%;
        margin: 0 0 1 0;
    }

    Transcript > #transcript-empty {
        width: 100%;
        height: auto;
        margin: 1 2;
        padding: 1 2;
        border: round $primary;
        color: $text-muted;
    }

    /* -- messages ------------------------------------------------------------------------ */

    UserMessage {
        height: auto;
        margin: 0 0 1 0;
        padding: 0 1;
        border-left: outer $primary;
    }

    UserMessage > .user-message--mention {
        color: $accent;
        text-style: bold;
    }

    UserMessage.steering {
        border-left: outer $warning;
    }

    AssistantMessage, ReplyView {
        height: auto;
        margin: 0 0 1 0;
        padding: 0 1;
        border-left: outer $success;
    }

    /* A focused message (Up/Down walk them; r, e, f act on it) must be obvious too. */
    UserMessage:focus, AssistantMessage:focus, ReplyView:focus {
        background: $boost;
        border-left: outer $accent;
    }

    AssistantMessage > .message-header, ReplyView > .message-header {
        height: 1;
    }

    AssistantMessage > .message-empty, ReplyView > .message-empty, ReplyView > .reply-thinking {
        color: $text-muted;
    }

    .message-marker {
        height: auto;
    }

    .message-marker.-interrupted {
        color: $text-warning;
    }

    .message-marker.-error {
        color: $text-error;
    }

    /* -- collapsible items --------------------------------------------------------------- */

    Foldable {
        height: auto;
        margin: 0 0 1 0;
        padding: 0 1;
        border-left: outer $panel-lighten-2;
    }

    AssistantMessage Foldable, ReplyView Foldable {
        margin: 0;
        padding: 0;
        border-left: none;
    }

    /* The focused item must be obvious: an accent bar and a tinted header. */
    Foldable:focus {
        background: $boost;
        border-left: outer $accent;
    }

    Foldable:focus > .fold-header {
        background: $accent 25%;
        text-style: bold;
    }

    Foldable > .fold-header {
        height: auto;
    }

    Foldable > .fold-summary {
        height: auto;
        padding-left: 2;
        color: $text-muted;
    }

    Foldable > .fold-body {
        height: auto;
        padding: 1 0 0 2;
    }

    Foldable.reasoning, Foldable.reasoning .fold-text {
        color: $text-muted;
    }

    ReferenceCard {
        border-left: outer $secondary;
        background: $surface;
    }

    CheckpointCard {
        border-left: outer $warning;
    }

    CheckpointCard.-expanded > .fold-summary {
        display: none;
    }

    ReferenceCard .card-source-box {
        height: auto;
        margin: 0 0 1 0;
    }

    ReferenceCard .card-source {
        height: auto;
    }

    ReferenceCard .card-open-source {
        margin: 0 0 0 1;
    }

    ReferenceCard .card-conversation-toggle {
        margin: 0 0 1 0;
    }

    ReferenceCard .card-conversation-body {
        height: auto;
    }

    ReferenceCard .card-conversation-heading {
        height: auto;
        color: $text-muted;
    }

    ReferenceCard .card-conversation {
        height: auto;
        margin: 0 0 1 0;
    }
    """

    class EarlierLoaded(Message):
        """A page of earlier items was mounted; ``remaining`` are still unmounted."""

        def __init__(self, transcript: Transcript, count: int, remaining: int) -> None:
            super().__init__()
            self.transcript = transcript
            self.count = count
            self.remaining = remaining

        @property
        def control(self) -> Transcript:
            return self.transcript

    class LoadFailed(Message):
        """Reading earlier messages failed (e.g. the session was deleted meanwhile)."""

        def __init__(self, transcript: Transcript, error: DshError) -> None:
            super().__init__()
            self.transcript = transcript
            self.error = error

        @property
        def control(self) -> Transcript:
            return self.transcript

    def __init__(
        self,
        *,
        page_size: int = PAGE_SIZE,
        max_mounted: int = MAX_MOUNTED,
        time_format: TimeFormat | None = format_time,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.page_size = max(1, page_size)
        self.max_mounted = max(self.page_size, max_mounted)
        self.time_format = time_format
        self._entries: list[Entry] = []
        self._widgets: list[Widget] = []  # mounted, aligned with self._entries[self._first :]
        self._first = 0
        # Older surface seqs whose events were not read yet (a window load); they come
        # before self._entries and are read a page at a time by "Load earlier messages".
        self._unread: list[int] = []
        self._fetch: FetchEvents | None = None
        # Unknown (log-only) events: those after ``_unknown_low`` up to ``_unknown_through``
        # were read; none at or before ``_unknown_floor`` belongs to the surface.
        self._fetch_unknown: FetchUnknown | None = None
        self._unknown_floor = -1
        self._unknown_low = -1
        self._unknown_through: int | None = None
        # False while only the newest rows were read: ``_unread`` then holds just the
        # context seq, and ``_fetch_seqs`` reads the rest when an earlier page is wanted.
        self._counted = True
        self._fetch_seqs: FetchSeqs | None = None
        self._counting: AwaitComplete | None = None  # the count started by load_window
        self._generation = 0  # bumped by every load: late reads of an old load are dropped
        self._fetching: int | None = None  # the generation being read, if any
        self._known_seqs: set[int] = set()
        self._reply: ReplyView | None = None
        self._button = Button("Load earlier messages", id="load-earlier", compact=True)
        self._button.display = False
        self._empty = EmptyState()
        self._origin = ForkBanner()  # a fork's parent, once the top of the surface is shown
        self._pending_loads = 0  # loads, pages and appends not mounted yet
        self._idle = asyncio.Event()
        self._idle.set()

    # -- state -------------------------------------------------------------------------

    @property
    def item_count(self) -> int:
        """Items in the transcript (mounted, unmounted or not yet read), the live reply
        included."""
        return len(self._unread) + len(self._entries)

    @property
    def mounted_count(self) -> int:
        return len(self._widgets)

    @property
    def known_seqs(self) -> frozenset[int]:
        """The surface seqs this transcript holds (shown, unmounted or not yet read)."""
        return frozenset(self._known_seqs)

    @property
    def item_widgets(self) -> list[Widget]:
        """The mounted item widgets, oldest first."""
        return list(self._widgets)

    @property
    def load_earlier_button(self) -> Button:
        return self._button

    @property
    def empty_state(self) -> EmptyState:
        return self._empty

    @property
    def reply(self) -> ReplyView | None:
        """The newest reply view started with ``begin_reply`` (finished or not)."""
        return self._reply

    @property
    def following(self) -> bool:
        """True while new content keeps the view at the bottom (the user has not scrolled away)."""
        # Textual keeps the release flag private; anchoring itself is public API.
        return self.is_anchored and not self._anchor_released

    @property
    def settled(self) -> bool:
        """True when everything loaded, paged in or appended so far is mounted."""
        return self._pending_loads == 0

    async def wait_until_settled(self) -> None:
        """Wait until ``settled`` (e.g. before a snapshot); wrap it in ``asyncio.timeout``
        to bound the wait."""
        await self._idle.wait()

    def _tracked(self, work: Awaitable[None]) -> AwaitComplete:
        """``work`` as an ``AwaitComplete`` that ``settled`` waits for."""
        self._pending_loads += 1
        self._idle.clear()

        async def tracking() -> None:
            try:
                await work
                if self.is_attached:  # and laid out: one screen refresh after the mounts
                    refreshed = asyncio.Event()
                    self.call_after_refresh(refreshed.set)
                    await refreshed.wait()
            finally:
                self._pending_loads -= 1
                if not self._pending_loads:
                    self._idle.set()

        return AwaitComplete(tracking())

    def compose(self) -> ComposeResult:
        yield self._origin  # above the button: earlier items are mounted right after it
        yield self._button
        yield self._empty

    def on_mount(self) -> None:
        self.anchor()

    # -- the origin and the items' events ----------------------------------------------

    @property
    def origin_banner(self) -> ForkBanner:
        return self._origin

    def set_origin(self, parent: ForkParent | None, label: str | None = None) -> None:
        """The session this one was forked from (``None``: not a fork), shown above the
        first item once the top of the surface is shown."""
        self._origin.show_origin(parent, label)
        self._update_chrome()

    def event_of(self, widget: Widget | None) -> Event | None:
        """The stored surface event of the item that holds ``widget`` (a message, or
        something inside one); ``None`` for anything else (folded history, a reply not
        stored yet, the chrome)."""
        while widget is not None and widget.parent is not self:
            parent = widget.parent
            widget = parent if isinstance(parent, Widget) else None
        if widget is None or widget not in self._widgets:
            return None
        entry = self._entries[self._first + self._widgets.index(widget)]
        if isinstance(entry, TranscriptItem) and entry.event.surface_op is None:
            return None  # a log-only item
        if isinstance(entry, TranscriptItem) and entry.kind == "history":
            return None
        return entry.event

    def last_reply_text(self) -> str | None:
        """The text of the newest assistant message with text among the items read so far
        (``None`` if there is none; see ``unread_count``)."""
        for entry in reversed(self._entries):
            if isinstance(entry, ReplyRecord):
                text = entry.text
            elif entry.kind == "assistant":
                text = message_text(as_mapping(entry.event.data.get("message")))
            else:
                continue
            if text:
                return text
        return None

    # -- a search hit (the paging itself: ``TranscriptPaging``) ------------------------

    async def reveal(self, seq: int) -> Widget | None:
        """Scroll to the item of surface seq ``seq`` (a search hit the user opened),
        reading and mounting earlier pages until it is there, and mark it for
        ``FOUND_MARK_S`` seconds (the ``-found`` class). ``None`` when this transcript does not
        hold it (a stale hit), when paging stops making progress (a read failed: the
        transcript reports it) or when another session is loaded meanwhile."""
        generation = self._generation
        while True:
            index = self._index_of(seq)
            if index is not None and index >= self._first:
                break
            if self._counted and seq not in self._known_seqs:
                return None
            hidden, unread = self.hidden_count, len(self._unread)
            if not hidden and self._counted:
                return None
            await self.load_earlier()
            if generation != self._generation:
                return None
            progressed = self.hidden_count < hidden or len(self._unread) != unread
            if not progressed and self._index_of(seq) is None:
                return None
        widget = self._widgets[index - self._first]
        self.release_anchor()  # the reader looks at this item now, not at the tail
        self.scroll_to_widget(widget, animate=False, top=True, immediate=True)
        widget.add_class("-found")
        self.set_timer(FOUND_MARK_S, lambda: widget.remove_class("-found"))
        return widget

    def _index_of(self, seq: int) -> int | None:
        """The index in ``_entries`` of the item of surface seq ``seq`` (read so far)."""
        for index in range(len(self._entries) - 1, -1, -1):
            entry = self._entries[index]
            event = entry.event
            if event is not None and event.seq == seq:
                return index
        return None

    # -- internals ---------------------------------------------------------------------

    def _load_failed(self, error: DshError) -> Message:
        """What paging posts when reading earlier messages failed."""
        return self.LoadFailed(self, error)

    def _earlier_loaded(self, count: int, remaining: int) -> Message:
        """What paging posts when a page of earlier items was mounted."""
        return self.EarlierLoaded(self, count, remaining)

    def _make_widget(self, entry: Entry) -> Widget:
        return entry_widget(entry, self._fetch, self._make_widget, self.time_format)

    def _update_chrome(self) -> None:
        hidden = self.hidden_count
        self._origin.display = self._origin.parent_session is not None and not hidden
        self._empty.display = not hidden and not self._entries
        self._button.display = hidden > 0
        reading = self._fetching is not None and self._fetching == self._generation
        self._button.disabled = reading
        label = load_earlier_label(hidden, reading, self._counted)
        if label is not None:
            self._button.label = label
