"""The transcript: a windowed replay of a session's current surface plus the streaming reply.

Only the newest ``page_size`` items are mounted; a "Load earlier messages" button at the
top mounts the previous page while keeping the view where it was (reading it from the store
first when the transcript was loaded from a surface window). Assistant messages are Markdown
with raw HTML disabled, so ``</referenced-sessions>`` stays visible text: every reply body,
stored or streaming, is one ``Static`` rendering ``reply_body`` (Rich Markdown through
``LiteralMarkdown``), so a reply is laid out the same live and after a reload (a Textual
``Markdown`` widget tree per message is far too slow to mount by the dozen).
Every piece of stored text is untrusted: it is escaped with ``escape_control`` and shown as
``rich.text.Text`` (or parsed as Markdown without HTML), never as Textual/Rich markup.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.await_complete import AwaitComplete
from textual.binding import BindingType
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Button, Static

from core.display import escape_control, single_line
from core.errors import DshError
from core.jsondepth import elide_deep
from core.limits import MAX_JSON_DEPTH
from core.log import ASSISTANT_MESSAGE, Event, message_text
from core.query import SurfaceWindow
from tui.app.transcript.cards import CheckpointCard, CollapsedItem, ReferenceCard
from tui.app.transcript.history import ForkBanner, history_widget, with_history
from tui.app.transcript.navigation import (
    ITEM_BINDINGS,
    MESSAGE_BINDINGS,
    ItemNavigation,
    MessageItem,
)
from tui.app.transcript.window import (
    Span,
    earlier_mount_start,
    earlier_read,
    first_mounted,
    load_earlier_label,
    place_to_keep,
    prune_count,
)
from tui.shared.items import (
    TranscriptItem,
    classify_surface,
    event_preview,
    with_unknown_events,
)
from tui.shared.lineage import ForkParent
from tui.shared.render import GrowingMarkdown, LiteralMarkdown, highlight_mentions
from tui.shared.times import local_minute

__all__ = [
    "EMPTY_STATE_TEXT",
    "EMPTY_STATE_TITLE",
    "FLUSH_INTERVAL",
    "MAX_MOUNTED",
    "PAGE_SIZE",
    "AssistantMessage",
    "EmptyState",
    "FetchEvents",
    "FetchSeqs",
    "FetchUnknown",
    "ReplyRecord",
    "ReplyView",
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
FLUSH_INTERVAL = 0.05
"""Streaming text is rendered again at most this often (seconds)."""

EMPTY_STATE_TITLE = "Start a conversation"
EMPTY_STATE_TEXT = (
    "Type a message below and press Enter to send it.\n"
    "Type @ to reference another session: a read-only snapshot of that session is attached "
    "to your message as background for the model.\n"
    "\n"
    "Ctrl+N starts a new session · Ctrl+P opens the command palette."
)

TimeFormat = Callable[[int], str]
format_time: TimeFormat = local_minute
"""Epoch milliseconds as local ``YYYY-MM-DD HH:MM`` (``tui.shared.times``, the one place)."""
FetchEvents = Callable[[Sequence[int]], Awaitable[Sequence[Event]]]
"""Reads the events with the given seqs (``SessionQuery.read_events_at`` for one session)."""
FetchSeqs = Callable[[], Awaitable[tuple[Sequence[int], int]]]
"""Reads every surface seq (node order) and the unknown events' floor
(``SessionQuery.read_surface_seqs`` for one session)."""
FetchUnknown = Callable[[int, int], Awaitable[Sequence[Event]]]
"""Reads the unknown (log-only) events with ``after < seq <= through``
(``SessionQuery.read_unknown_events`` for one session)."""
Status = Literal["completed", "interrupted", "error"]


def reasoning_text(message: Mapping[str, Any]) -> str:
    """The message's ``reasoning`` blocks joined by newlines."""
    return message_text(message, "reasoning")


def tool_result_text(message: Mapping[str, Any]) -> tuple[str, bool]:
    """The text of a tool-result message (top-level and nested text blocks) and its error flag."""
    content = message.get("content")
    parts: list[str] = []
    is_error = False
    for block in content if isinstance(content, (list, tuple)) else ():
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif block.get("type") == "tool-result":
            is_error = is_error or block.get("isError") is True
            inner = block.get("content")
            for sub in inner if isinstance(inner, (list, tuple)) else ():
                if (
                    isinstance(sub, Mapping)
                    and sub.get("type") == "text"
                    and isinstance(sub.get("text"), str)
                ):
                    parts.append(sub["text"])
    return "\n".join(parts), is_error


def checkpoint_text(stored: str) -> str:
    """The summary a compaction checkpoint holds, without its ``<compacted-summary>`` tags."""
    text = stored.strip()
    text = text.removeprefix("<compacted-summary>").removesuffix("</compacted-summary>")
    return text.strip()


def last_assistant_text(events: Sequence[Event]) -> str | None:
    """The text of the newest assistant message with text among ``events`` (or ``None``)."""
    for event in reversed(events):
        if event.type == ASSISTANT_MESSAGE:
            text = message_text(_mapping(event.data.get("message")))
            if text:
                return text
    return None


def _done() -> AwaitComplete:
    """An already finished awaitable, for calls that have nothing to do."""

    async def nothing() -> None:
        return None

    return AwaitComplete(nothing())


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _first_line(text: str, limit: int = 80) -> str:
    for line in text.splitlines():
        if line.strip():
            return single_line(line.strip(), limit)
    return ""


MAX_SHOWN_CHARS = 20_000
"""A stored message (or reasoning, summary, tool result, event body) longer than this is
shown cut, with a note; the log keeps it whole."""


def _shown(text: str) -> str:
    """``text`` cut for display: wrapping megabytes on every layout would freeze the UI."""
    if len(text) <= MAX_SHOWN_CHARS:
        return text
    return text[:MAX_SHOWN_CHARS] + _cut_note(len(text) - MAX_SHOWN_CHARS)


def _cut_note(hidden: int) -> str:
    return f"\n\n[… {hidden:,} more characters not shown here; export the session to read it all]"


NO_TEXT = Text("(no text)", style="dim italic")
"""What a reply without text shows in place of its body."""


def reply_body(text: str) -> LiteralMarkdown | Text:
    """The body of an assistant reply, live or replayed: ``text`` cut for display
    (``_shown``), escaped and laid out as literal Markdown (raw HTML stays text, links are
    never hyperlinks). Both views use it, so a reply looks the same after a reload."""
    if not text:
        return NO_TEXT
    return LiteralMarkdown(escape_control(_shown(text)))


def _header(label: str, detail: Iterable[str]) -> Text:
    text = Text(label, style="bold")
    for part in detail:
        if part:
            text.append(" · " + part, style="dim")
    return text


# --------------------------------------------------------------------------- items


class UserMessage(MessageItem, Static, can_focus=True):
    """A direct user message (or steering message): readable text, ``@label`` mentions styled
    by the component class ``user-message--mention`` (theme colours, in the stylesheet)."""

    BINDINGS: ClassVar[list[BindingType]] = MESSAGE_BINDINGS

    COMPONENT_CLASSES: ClassVar[set[str]] = {"user-message--mention"}

    def __init__(
        self,
        text: str,
        *,
        labels: Sequence[str] = (),
        title: str = "You",
        time: str = "",
        classes: str | None = None,
    ) -> None:
        self.text = text
        self._labels = tuple(labels)
        self._title = title
        self._time = time
        self._drawn: tuple[Style, Text] | None = None
        super().__init__(markup=False, classes=classes)

    def render(self) -> Text:
        # The mention style comes from the theme (the component class's CSS), so the text
        # is built when drawn, and again only when the theme changes the style.
        style = self.get_component_rich_style("user-message--mention", partial=True)
        if self._drawn is None or self._drawn[0] != style:
            body = _header(self._title, [self._time])
            body.append("\n")
            body.append_text(highlight_mentions(_shown(self.text), self._labels, style))
            self._drawn = (style, body)
        return self._drawn[1]


class EmptyState(Static):
    """What a newcomer sees in an empty session."""

    def __init__(self) -> None:
        text = Text(EMPTY_STATE_TITLE + "\n\n", style="bold")
        text.append(EMPTY_STATE_TEXT)
        super().__init__(text, id="transcript-empty", markup=False)


def _marker(status: str | None, error: str | None) -> Text | None:
    if error is not None or status == "error":
        text = Text("✖ Error", style="bold")
        if error:
            text.append(": " + escape_control(error))
        return text
    if status == "interrupted":
        return Text("⏸ Interrupted: the reply was stopped", style="bold")
    return None


class AssistantMessage(MessageItem, Vertical, can_focus=True):
    """A stored assistant message: header, collapsed reasoning, Markdown body, status marker."""

    BINDINGS: ClassVar[list[BindingType]] = MESSAGE_BINDINGS

    def __init__(
        self,
        text: str,
        *,
        reasoning: str = "",
        model: str | None = None,
        time: str = "",
        status: str | None = None,
        error: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(classes=classes)
        self.text = text
        self.reasoning = reasoning
        self.status = status
        self.error = error
        self._header = Static(
            _header("Assistant", [single_line(model, 60) if model else "", time]),
            classes="message-header",
            markup=False,
        )
        self._body = Static(
            reply_body(text), classes="message-body-static" if text else "message-empty"
        )
        marker = _marker(status, error)
        self._marker = (
            None
            if marker is None
            else Static(
                marker,
                markup=False,
                classes="message-marker "
                + ("-error" if error or status == "error" else "-interrupted"),
            )
        )

    @classmethod
    def from_event(cls, event: Event, *, time_format: TimeFormat | None = None) -> AssistantMessage:
        data = event.data
        message = _mapping(data.get("message"))
        source = _mapping(message.get("source"))
        model = source.get("model")
        finish = data.get("finish")
        status = finish if isinstance(finish, str) else None
        if data.get("interrupted") is True and status is None:
            status = "interrupted"
        error_data = data.get("error")
        error: str | None = None
        if isinstance(error_data, Mapping):
            error = str(error_data.get("message") or error_data.get("kind") or "")
        elif error_data is not None:
            error = str(error_data)
        return cls(
            message_text(message),
            reasoning=reasoning_text(message),
            model=model if isinstance(model, str) else None,
            time=time_format(event.time) if time_format is not None else "",
            status=status,
            error=error,
        )

    def compose(self) -> ComposeResult:
        yield self._header
        if self.reasoning:
            yield CollapsedItem("Reasoning", _shown(self.reasoning), classes="reasoning")
        yield self._body
        if self._marker is not None:
            yield self._marker


@dataclass
class ReplyRecord:
    """What a live reply has shown (kept so the reply can be mounted again after paging).

    Deltas are collected in lists and joined when read: ``text += delta`` copied the whole
    reply per delta (a 1 MB reply in 10-byte deltas: ~40 s of a frozen UI).
    """

    text_parts: list[str] = field(default_factory=list)
    reasoning_parts: list[str] = field(default_factory=list)
    status: Status | None = None  # None while streaming
    error: str | None = None
    event: Event | None = None

    @property
    def text(self) -> str:
        return _joined(self.text_parts)

    @property
    def reasoning(self) -> str:
        return _joined(self.reasoning_parts)


def _joined(parts: list[str]) -> str:
    """The parts as one string, kept as the list's only item until more arrive."""
    if len(parts) > 1:
        parts[:] = ["".join(parts)]
    return parts[0] if parts else ""


class ReplyView(MessageItem, Vertical, can_focus=True):
    """The streaming assistant reply.

    ``append`` is cheap and synchronous; the body (``reply_body``, the one a stored reply gets)
    is rendered again with the text so far at most every ``FLUSH_INTERVAL`` seconds.
    ``finish`` flushes and shows the interrupted/error marker.
    """

    BINDINGS: ClassVar[list[BindingType]] = MESSAGE_BINDINGS

    class Finished(Message):
        """The reply finished (posted after the last text was rendered)."""

        def __init__(self, view: ReplyView) -> None:
            super().__init__()
            self.view = view

        @property
        def control(self) -> ReplyView:
            return self.view

    def __init__(self, record: ReplyRecord | None = None, *, classes: str | None = None) -> None:
        super().__init__(classes=classes)
        self.record = record if record is not None else ReplyRecord()
        self._text_dirty = False
        self._shown_chars = 0  # of the text rendered so far (at most MAX_SHOWN_CHARS)
        self._growing = GrowingMarkdown()  # the body while streaming
        self._source = ""  # the escaped Markdown the body shows
        self._reasoning_dirty = False
        self._timer: Timer | None = None
        self._lock = asyncio.Lock()
        self._ready = asyncio.Event()
        self._header = Static(_header("Assistant", []), classes="message-header", markup=False)
        self._thinking = Static(Text("thinking…", style="dim italic"), classes="reply-thinking")
        self._reasoning: CollapsedItem | None = None
        self._body = Static(classes="message-body-static")
        self._body.display = False
        self._marker = Static(classes="message-marker", markup=False)
        self._marker.display = False

    @property
    def text(self) -> str:
        return self.record.text

    @property
    def finished(self) -> bool:
        return self.record.status is not None

    @property
    def body(self) -> Static:
        """The Static showing the reply's Markdown."""
        return self._body

    @property
    def source(self) -> str:
        """The escaped Markdown the body shows (cut, with a note, past ``MAX_SHOWN_CHARS``)."""
        return self._source

    def compose(self) -> ComposeResult:
        yield self._header
        yield self._thinking
        yield self._body
        yield self._marker

    def on_mount(self) -> None:
        self._ready.set()
        if self._text_dirty or self._reasoning_dirty:
            self._schedule()

    def on_unmount(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._ready.set()  # release anyone waiting in finish()

    def append(self, kind: Literal["text", "reasoning"] | str, text: str) -> None:
        """Add a streamed delta: ``"text"`` (Markdown) or ``"reasoning"`` (collapsed, dimmed)."""
        if not text or self.finished:
            return
        if kind == "reasoning":
            self.record.reasoning_parts.append(text)
            self._reasoning_dirty = True
        else:
            self.record.text_parts.append(text)
            self._text_dirty = True
        self._schedule()

    def _schedule(self) -> None:
        if self._timer is None and self.is_mounted and self.is_attached:
            self._timer = self.set_timer(FLUSH_INTERVAL, self._on_flush_timer)

    async def _on_flush_timer(self) -> None:
        self._timer = None
        await self._flush()

    async def _flush(self) -> None:
        async with self._lock:
            if not self.is_attached:
                return
            if self._reasoning_dirty:
                self._reasoning_dirty = False
                if self._reasoning is None:
                    self._reasoning = CollapsedItem(
                        "Thinking…", _shown(self.record.reasoning), classes="reasoning"
                    )
                    self._thinking.display = False  # the fold's "Thinking…" says it
                    await self.mount(self._reasoning, before=self._body)
                else:
                    self._reasoning.set_body(_shown(self.record.reasoning))
            if self._text_dirty:
                # Cut like a stored message: re-rendering a growing paragraph of megabytes
                # on every flush froze the UI; the note comes with ``finish``.
                self._text_dirty = False
                self._thinking.display = False
                if self._shown_chars < MAX_SHOWN_CHARS:
                    shown = self.record.text[:MAX_SHOWN_CHARS]
                    self._shown_chars = len(shown)
                    self._source = escape_control(shown)
                    self._growing.update(self._source)
                    self._body.update(self._growing)
                    self._body.display = True

    def finish(
        self, status: Status | str, error_message: str | None = None, *, event: Event | None = None
    ) -> AwaitComplete:
        """End the stream: render what is left and show a marker for interrupted/error.

        ``event`` (the stored ``assistant/message``) lets the transcript know this reply is
        already on screen, so adding that event later does not show it twice.
        """
        if self.finished:
            return _done()
        normalized: Status = "error"
        if status == "completed":
            normalized = "completed"
        elif status == "interrupted":
            normalized = "interrupted"
        self.record.status = normalized
        self.record.error = error_message
        if event is not None:
            self.record.event = event
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

        async def finishing() -> None:
            await self._ready.wait()
            await self._flush()
            if not self.is_attached:
                return
            self._thinking.display = False
            text = self.record.text
            # Exactly what the stored reply will show (GrowingMarkdown lays it out the
            # same, but only the whole text parsed at once is the reference).
            body = reply_body(text)
            self._source = body.markup if isinstance(body, LiteralMarkdown) else ""
            self._body.update(body)
            if not text:
                self._body.set_classes("message-empty")
            self._body.display = True
            if self._reasoning is not None:
                self._reasoning.set_title("Reasoning")
            stored = self.record.event
            if stored is not None:  # the same header a replayed reply gets
                message = stored.data.get("message")
                source = message.get("source") if isinstance(message, Mapping) else None
                model = source.get("model") if isinstance(source, Mapping) else None
                fmt = getattr(self.parent, "time_format", format_time)
                self._header.update(
                    _header(
                        "Assistant",
                        [
                            single_line(str(model), 60) if model else "",
                            fmt(stored.time) if fmt is not None else "",
                        ],
                    )
                )
            marker = _marker(normalized, error_message)
            if marker is not None:
                self._marker.update(marker)
                self._marker.set_class(normalized == "error", "-error")
                self._marker.set_class(normalized == "interrupted", "-interrupted")
                self._marker.display = True
            self.post_message(self.Finished(self))

        return AwaitComplete(finishing())


# --------------------------------------------------------------------------- transcript

Entry = TranscriptItem | ReplyRecord
FOUND_MARK_S = 3.0
"""How long an item opened from a search hit stays marked (seconds)."""


class Transcript(ItemNavigation, VerticalScroll):
    """The scrollable transcript of one session (see the module docstring)."""

    BINDINGS: ClassVar[list[BindingType]] = ITEM_BINDINGS

    # The transcript and its items (messages here, folds and cards in cards.py): a reusable
    # widget's styles travel with it, whichever app or screen mounts it.
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
    def hidden_count(self) -> int:
        """Earlier items not mounted (what "Load earlier messages" would bring back)."""
        return len(self._unread) + self._first

    @property
    def unread_count(self) -> int:
        """Earlier items whose events were not read from the store yet."""
        return len(self._unread)

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

    # -- replay ------------------------------------------------------------------------

    def load(self, events: Sequence[Event]) -> AwaitComplete:
        """Replace everything with the replay of a whole current surface (newest page mounted)."""
        self._fetch_unknown, self._unknown_floor, self._unknown_low = None, -1, -1
        self._unknown_through = None
        self._counted, self._fetch_seqs, self._counting = True, None, None
        items = with_history(classify_surface(events))
        return self._replace(items, {event.seq for event in events}, [])

    def load_window(
        self,
        window: SurfaceWindow,
        fetch: FetchEvents,
        fetch_unknown: FetchUnknown | None = None,
        fetch_seqs: FetchSeqs | None = None,
    ) -> AwaitComplete:
        """Replace everything with the replay of a surface of which only the newest events
        were read; ``fetch`` reads earlier pages when the user asks for them, and
        ``fetch_unknown`` the unknown events among them (``window.unknown`` holds those
        among the newest events). A window that is not ``complete`` (read from the
        newest rows only) is shown at once and learns the earlier seqs from
        ``fetch_seqs`` afterwards (in the background, or when an earlier page is wanted
        first); until then the button gives no count.

        Unless the window starts at the surface's beginning, its first event only gives
        context (a user message after a reference card shows the card's labels) and is
        read again with the page before it.
        """
        unread = list(window.unread)
        events = list(window.events)
        counted = window.complete or fetch_seqs is None
        more = bool(unread) or not counted
        context: Event | None = None
        if more and len(events) > 1:
            context = events.pop(0)
            unread.append(context.seq)
        elif not unread:
            counted = True  # the window holds the whole surface
        floor = window.unknown_floor
        low = max(floor, events[0].seq) if unread and events else floor
        unknown = [event for event in window.unknown if event.seq > low]
        merged = with_unknown_events(events, unknown)
        items = with_history(
            classify_surface([context, *merged])[1:]
            if context is not None
            else classify_surface(merged)
        )
        self._unknown_floor, self._unknown_low = floor, low
        self._unknown_through = window.captured_through_seq
        self._fetch_unknown = fetch_unknown
        self._counted, self._fetch_seqs = counted, fetch_seqs
        replaced = self._replace(items, set(window.seqs), unread, fetch)
        self._counting = None
        if not counted and fetch_seqs is not None:
            # After the page is drawn (it does not wait for this): the earlier seqs,
            # so the button can say how many there are.
            self._counting = self._tracked(
                self._count_later(self._generation, fetch_seqs, replaced)
            )
        return replaced

    def _replace(
        self,
        entries: Sequence[Entry],
        known: set[int],
        unread: list[int],
        fetch: FetchEvents | None = None,
    ) -> AwaitComplete:
        old = [*self._widgets]
        self._generation += 1
        self._fetch = fetch
        self._reply = None
        self._entries = list(entries)
        self._unread = unread
        self._known_seqs = known
        self._first = first_mounted(len(self._entries), self.page_size)
        self._widgets = [self._make_widget(entry) for entry in self._entries[self._first :]]
        removing = self.remove_children(old)
        mounting = self.mount_all(self._widgets) if self._widgets else None
        self._update_chrome()
        self.anchor()

        async def loading() -> None:
            await removing
            if mounting is not None:
                await mounting

        return self._tracked(loading())

    def show_empty_state(self) -> AwaitComplete:
        """Clear the transcript and show the newcomer's guide (no session, or an empty one)."""
        self._origin.show_origin(None, None)
        return self.load(())

    def add_events(
        self,
        events: Sequence[Event],
        unknown: Sequence[Event] = (),
        *,
        through: int | None = None,
    ) -> AwaitComplete:
        """Append newly stored surface events (already shown ones are skipped) and the
        unknown events stored with them (``unknown``, read through seq ``through``: those
        already read are skipped)."""
        new = [event for event in events if event.seq not in self._known_seqs]
        fresh = [
            event
            for event in unknown
            if event.seq > self._unknown_low
            and (self._unknown_through is None or event.seq > self._unknown_through)
        ]
        if through is not None:
            self._unknown_through = max(through, self._unknown_through or -1)
        if not new and not fresh:
            return _done()
        self._known_seqs.update(event.seq for event in new)
        items = self._classify_tail(with_unknown_events(new, fresh))
        widgets: list[Widget] = []
        for item in items:
            if item.kind == "assistant" and self._adopt_reply(item):
                continue
            self._entries.append(item)
            widget = self._make_widget(item)
            self._widgets.append(widget)
            widgets.append(widget)
        mounting = self.mount_all(widgets) if widgets else None
        pruning = self._prune()
        self._update_chrome()

        async def adding() -> None:
            if mounting is not None:
                await mounting
            if pruning is not None:
                await pruning

        return self._tracked(adding())

    def begin_reply(self) -> ReplyView:
        """Mount and return a streaming assistant block at the end of the transcript."""
        record = ReplyRecord()
        view = ReplyView(record)
        self._entries.append(record)
        self._widgets.append(view)
        self._reply = view
        self.mount(view)
        self._prune()
        self._update_chrome()
        return view

    def follow(self) -> None:
        """Jump to the newest content and follow it again (e.g. when the user sends)."""
        self.anchor()

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
                text = message_text(_mapping(entry.event.data.get("message")))
            else:
                continue
            if text:
                return text
        return None

    # -- paging ------------------------------------------------------------------------

    def load_earlier(self) -> AwaitComplete:
        """Mount the previous page above the current items, keeping the view in place
        (reading it from the store first when it was not read yet)."""
        if self._first > 0:
            return self._mount_earlier()
        if not self._unread or self._fetch is None or self._fetching == self._generation:
            return _done()
        return self._tracked(self._read_earlier(self._fetch))

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

    def _counted_earlier(self, seqs: Sequence[int], floor: int) -> None:
        """Every surface seq is known now (a transcript opened from the newest rows only):
        those before the items read so far become ``_unread``."""
        oldest = self._unread[0] if self._unread else None
        if oldest is None:
            oldest = next(
                (e.event.seq for e in self._entries if isinstance(e, TranscriptItem)), None
            )
        self._counted = True
        try:
            index = list(seqs).index(oldest) if oldest is not None else -1
        except ValueError:
            # The surface changed meanwhile (a compaction elsewhere): nothing earlier is
            # read from this view; the follower reloads the transcript.
            self._unread.clear()
            return
        earlier = list(seqs[:index]) if index > 0 else []
        self._unread[:0] = earlier
        self._known_seqs.update(earlier)
        self._unknown_floor = floor

    async def _count_later(
        self, generation: int, fetch_seqs: FetchSeqs, page: AwaitComplete
    ) -> None:
        """Count the earlier items once the newest ``page`` is mounted and drawn (a
        failure is left to paging, which reads them again and reports it)."""
        await page
        try:
            seqs, floor = await fetch_seqs()
        except DshError:
            return
        if generation == self._generation and not self._counted:
            self._counted_earlier(seqs, floor)
            self._update_chrome()

    async def _read_earlier(self, fetch: FetchEvents) -> None:
        generation = self._generation
        self._fetching = generation
        self._update_chrome()
        counting = self._counting
        if not self._counted and counting is not None and not counting.is_done:
            await counting  # the count load_window started
            if generation != self._generation:
                return
        if not self._counted and self._fetch_seqs is not None:
            try:
                seqs, floor = await self._fetch_seqs()
            except DshError as err:
                if generation == self._generation:
                    self._fetching = None
                    self._update_chrome()
                    self.post_message(self.LoadFailed(self, err))
                return
            if generation != self._generation:
                return
            self._counted_earlier(seqs, floor)
            if not self._unread:
                self._fetching = None
                self._update_chrome()
                return
        read = earlier_read(self._unread, self.page_size)
        try:
            events = list(await fetch(read.seqs))
            page = events[1:] if read.context is not None else events
            low, unknown = await self._read_unknown(page, len(self._unread) == len(read.page))
        except DshError as err:
            if generation == self._generation:
                self.post_message(self.LoadFailed(self, err))
            return
        finally:
            if self._fetching == generation:
                self._fetching = None
            if generation == self._generation:
                self._update_chrome()
        if generation != self._generation or self._first > 0:
            return  # another session was loaded meanwhile
        self._unknown_low = min(low, self._unknown_low)
        if unknown:
            merged = with_unknown_events(page, unknown)
            events = [events[0], *merged] if read.context is not None else merged
        items = classify_surface(events)
        if read.context is not None:
            items = items[1:]
        items = with_history(items)
        del self._unread[-len(read.page) :]
        self._entries[:0] = items
        self._first = len(items)
        await self._mount_earlier()

    async def _read_unknown(
        self, page: Sequence[Event], first_page: bool
    ) -> tuple[int, list[Event]]:
        """The unknown events shown with an earlier ``page`` (the surface's first page
        when ``first_page``): those between it and the items already read; with the new
        lower bound of what was read."""
        fetch = self._fetch_unknown
        high = self._unknown_low
        if fetch is None:
            return high, []
        floor = self._unknown_floor
        low = floor if first_page or not page else max(floor, page[0].seq)
        if high <= low:
            return high, []
        return low, [event for event in await fetch(low, high) if low < event.seq <= high]

    def _mount_earlier(self) -> AwaitComplete:
        start = earlier_mount_start(self._first, self.page_size)
        widgets = [self._make_widget(entry) for entry in self._entries[start : self._first]]
        position = self._capture_position()
        self._first = start
        self._widgets[:0] = widgets
        mounting = self.mount_all(widgets, after=self._button)
        self._update_chrome()
        count, remaining = len(widgets), self.hidden_count

        async def loading() -> None:
            await mounting
            if position is not None:
                self.call_after_refresh(self._restore_position, position)
            self.post_message(self.EarlierLoaded(self, count, remaining))

        return self._tracked(loading())

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button is self._button:
            event.stop()
            self.load_earlier()

    # -- internals ---------------------------------------------------------------------

    def _classify_tail(self, events: Sequence[Event]) -> list[TranscriptItem]:
        """Classify new events; a user message right after an already shown card keeps its labels."""
        last = self._entries[-1] if self._entries else None
        if isinstance(last, TranscriptItem) and last.kind == "card":
            return with_history(classify_surface([last.event, *events])[1:])
        return with_history(classify_surface(events))

    def _adopt_reply(self, item: TranscriptItem) -> bool:
        """Bind a stored assistant message to the finished reply already on screen."""
        for index in range(len(self._entries) - 1, -1, -1):
            entry = self._entries[index]
            if isinstance(entry, ReplyRecord):
                if entry.status is None or (
                    entry.event is not None and entry.event.seq != item.event.seq
                ):
                    return False
                entry.event = item.event
                self._entries[index] = item
                return True
            if entry.kind in ("assistant", "user", "card"):
                return False  # a newer reply or a new turn: not the reply on screen
        return False

    def _time(self, event: Event) -> str:
        return self.time_format(event.time) if self.time_format is not None else ""

    def _make_widget(self, entry: Entry) -> Widget:
        if isinstance(entry, TranscriptItem):  # folded history, a profile or fork note
            special = history_widget(entry, self._fetch, self._make_widget)
            if special is not None:
                return special
        if isinstance(entry, ReplyRecord):
            if entry.event is not None:
                return AssistantMessage.from_event(entry.event, time_format=self.time_format)
            return AssistantMessage(
                entry.text, reasoning=entry.reasoning, status=entry.status, error=entry.error
            )
        event, data = entry.event, entry.event.data
        if entry.kind == "card" and entry.card is not None:
            return ReferenceCard(entry.card)
        if entry.kind == "user":
            return UserMessage(
                message_text(data), labels=entry.labels, time=self._time(event), classes="user"
            )
        if entry.kind == "steering":
            return UserMessage(
                message_text(_mapping(data.get("message"))),
                title="You (steering)",
                time=self._time(event),
                classes="steering",
            )
        if entry.kind == "assistant":
            return AssistantMessage.from_event(event, time_format=self.time_format)
        if entry.kind == "checkpoint":
            summary = checkpoint_text(message_text(data))
            return CheckpointCard(_shown(summary), detail=_first_line(summary) or None)
        if entry.kind == "tool":
            message = _mapping(data.get("message"))
            call = _mapping(message.get("source")).get("callId")
            text, is_error = tool_result_text(message)
            title = "Tool result" + (f" {call}" if isinstance(call, str) and call else "")
            if is_error:
                title += " (error)"
            preview = _first_line(text)
            return CollapsedItem(
                title + (f": {preview}" if preview else ""), _shown(text), classes="tool-result"
            )
        if entry.kind == "context":
            source = _mapping(data.get("source"))
            who = source.get("plugin") or source.get("kind") or "?"
            return CollapsedItem(
                f"Context from {who}", _shown(message_text(data)), classes="context"
            )
        shown = elide_deep(data, MAX_JSON_DEPTH)  # older rows may nest deeper: "…"
        body = json.dumps(shown, ensure_ascii=False, indent=2, default=str)
        title = f"{single_line(event.type, 80)} event · {event_preview(event)}"
        return CollapsedItem(title, _shown(body), classes="unknown")

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

    def _prune(self) -> Awaitable[Any] | None:
        """Unmount the oldest items of a long live session while the view follows the tail."""
        excess = prune_count(len(self._widgets), self.max_mounted, self.page_size)
        if not excess or not self.following:
            return None
        gone = [w for w in self._widgets[:excess] if w is not self._reply]
        if len(gone) != excess:
            return None
        del self._widgets[:excess]
        self._first += excess
        return self.remove_children(gone)

    def _capture_position(self) -> tuple[Widget, int] | None:
        """The first item that starts in the view and its offset from the top of the view
        (None when following: Textual then keeps the bottom pinned by itself)."""
        if self.following:
            return None
        spans = (Span(w.virtual_region.y, w.virtual_region.bottom) for w in self._widgets)
        place = place_to_keep(spans, round(self.scroll_y))
        if place is None:
            return None
        index, offset = place
        return self._widgets[index], offset

    def _restore_position(self, position: tuple[Widget, int]) -> None:
        widget, offset = position
        if widget.is_attached and not self.following:
            self.scroll_to(y=widget.virtual_region.y - offset, animate=False, immediate=True)
