"""What a retry, an edit or a fork left in the transcript: folded history and log notes.

Retry and edit are surface replaces (``core.control``): the new reply, or the edited
message, takes the place of a run of the surface and lists that run's seqs in its
``source_event_seqs``. The transcript puts a folded item right before such an event
("Earlier attempt" before a retried reply, "Edited — N earlier messages" before an edited
message); expanding it reads those events (``read_events_at``, a page at a time) and shows
them with the transcript's own item widgets, so they are escaped exactly as the surface is
(replaced events inside get their own fold). Compaction checkpoints keep their own card.

``session/profile`` and ``session/fork`` are log-only events the transcript reads among its
unknown items: a profile switch is one dim line; a fork's origin is the transcript's
``ForkBanner`` at its top (shown whatever replaces came since), so its event draws nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button, Static

from core.display import single_line
from core.errors import DshError
from core.log import ASSISTANT_MESSAGE, SESSION_FORK, SESSION_PROFILE, Event, Replace
from tui.app.transcript.cards import Foldable
from tui.app.transcript.navigation import MessageItem
from tui.shared.items import TranscriptItem, classify_surface
from tui.shared.lineage import ForkParent, fork_parent

__all__ = [
    "HISTORY",
    "HISTORY_PAGE",
    "ForkBanner",
    "ForkMark",
    "HistoryFold",
    "ProfileNote",
    "history_widget",
    "replaced_seqs",
    "with_history",
]

HISTORY = "history"
"""The kind of the transcript item put before an event that replaced others."""
HISTORY_PAGE = 24
"""Replaced events read and shown per page of an expanded fold."""
LABEL_CHARS = 80

ReadEvents = Callable[[Sequence[int]], Awaitable[Sequence[Event]]]
"""Reads the session's events with these seqs (the transcript's ``FetchEvents``)."""
MakeWidget = Callable[[TranscriptItem], Widget]
"""The transcript's widget for one item."""

_FOLDED_KINDS = frozenset({"user", "card", "assistant", "steering"})
"""Items whose replace is a retry or an edit (a checkpoint has its own card)."""


def replaced_seqs(item: TranscriptItem) -> tuple[int, ...]:
    """The seqs an item's event replaced when that was a retry or an edit, else ``()``."""
    event = item.event
    if item.kind not in _FOLDED_KINDS or not isinstance(event.surface_op, Replace):
        return ()
    return tuple(event.source_event_seqs or ())


def with_history(items: Iterable[TranscriptItem]) -> list[TranscriptItem]:
    """``items`` with a ``HISTORY`` item (same event) before each retried reply and each
    edited message."""
    out: list[TranscriptItem] = []
    for item in items:
        if replaced_seqs(item):
            out.append(TranscriptItem(HISTORY, item.event))
        out.append(item)
    return out


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


class HistoryFold(Foldable):
    """The events a retry or an edit replaced, folded; read from the log on first expand."""

    def __init__(
        self,
        event: Event,
        fetch: ReadEvents | None,
        make_widget: MakeWidget,
        *,
        classes: str | None = None,
    ) -> None:
        self.event = event
        self.seqs = tuple(event.source_event_seqs or ())
        self.retry = event.type == ASSISTANT_MESSAGE
        self._fetch = fetch
        self._make_widget = make_widget
        self._read = 0  # how many of ``seqs`` are shown
        self._before: Event | None = None  # the last event shown (a card's labels)
        self._status = _Status(self._read_page)
        self._more = Button("", classes="history-more", compact=True)
        self._reading = False
        super().__init__(classes=f"history {classes or ''}".strip())

    def title_text(self) -> Text:
        if self.retry:
            runs = len(self.seqs)
            return Text("Earlier attempt" + (f" ({runs} items)" if runs > 1 else ""))
        return Text("Edited — " + _plural(len(self.seqs), "earlier message"))

    @property
    def shown_count(self) -> int:
        """How many of the replaced events were read and shown so far."""
        return self._read

    def build_body(self) -> Iterable[Widget]:
        self._more.display = False
        yield self._status  # reads the first page once mounted
        yield self._more

    async def _read_page(self) -> None:
        """Read and show the next page of replaced events (all or nothing per page)."""
        fetch = self._fetch
        if self._reading:
            return
        if fetch is None:
            self._status.update(Text("(the replaced messages are in the session's log)"))
            return
        self._reading = True
        self._more.disabled = True
        self._status.update(Text("Reading…", style="dim italic"))
        self._status.display = True
        page = self.seqs[self._read : self._read + HISTORY_PAGE]
        try:
            events = list(await fetch(page))
        except DshError as err:
            self._status.update(
                Text("Could not read the earlier messages: " + single_line(str(err), 200))
            )
            return
        finally:
            self._reading = False
            self._more.disabled = False
        context = self._before
        items = classify_surface([context, *events] if context is not None else events)
        if context is not None:
            items = items[1:]
        widgets = [self._make_widget(item) for item in with_history(items)]
        for widget in widgets:
            if isinstance(widget, MessageItem):
                # Off the surface: nothing can be retried, edited or forked from here.
                widget.can_focus = False
        self._read += len(page)
        self._before = events[-1] if events else context
        body = self.body
        if body is None or not self.is_attached:
            return
        await body.mount_all(widgets, before=self._status)
        self._status.display = False
        left = len(self.seqs) - self._read
        next_page = min(left, HISTORY_PAGE)
        self._more.label = f"Show {next_page} more" + (f" of {left}" if left > next_page else "")
        self._more.display = left > 0

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button is self._more:
            event.stop()
            self.call_later(self._read_page)


class _Status(Static):
    """What a fold's body says while it reads (or why it could not); once mounted, with
    the body, it starts the first read."""

    def __init__(self, read: Callable[[], Awaitable[None]]) -> None:
        super().__init__("", classes="history-status", markup=False)
        self._read = read

    def on_mount(self) -> None:
        self.call_later(self._read)


class ProfileNote(Static):
    """A ``session/profile`` event: "Profile → work · provider · model", one dim line."""

    DEFAULT_CSS = """
    ProfileNote {
        height: auto;
        margin: 0 0 1 0;
        padding: 0 1;
        color: $text-muted;
    }
    """

    def __init__(self, event: Event) -> None:
        self.event = event
        data = event.data
        text = Text("Profile → ", no_wrap=True, overflow="ellipsis")
        name = data.get("profile")
        text.append(single_line(name, LABEL_CHARS) if isinstance(name, str) else "?", "bold")
        for key in ("provider", "model"):
            value = data.get(key)
            if isinstance(value, str) and value:
                text.append(" · " + single_line(value, LABEL_CHARS))
        super().__init__(text, markup=False)


class ForkMark(Static):
    """A ``session/fork`` event among the unknown items: drawn by the ``ForkBanner``."""

    def __init__(self, event: Event) -> None:
        super().__init__("", markup=False)
        self.event = event
        self.display = False


class ForkBanner(Static, can_focus=True):
    """At the top of a fork: the session it was forked from and where; a click (or Enter,
    focused: Up from the first message) opens that session (``OpenParent``)."""

    DEFAULT_CSS = """
    ForkBanner {
        height: auto;
        margin: 0 0 1 0;
        padding: 0 1;
        color: $text-muted;
        border-left: outer $secondary;
    }
    ForkBanner:focus {
        background: $boost;
        border-left: outer $accent;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "open_parent", "Open parent")]

    class OpenParent(Message):
        """The user asked to open the session this one was forked from."""

        def __init__(self, banner: ForkBanner, session_id: str) -> None:
            super().__init__()
            self.banner = banner
            self.session_id = session_id

        @property
        def control(self) -> ForkBanner:
            return self.banner

    def __init__(self) -> None:
        super().__init__("", id="fork-banner", markup=False)
        self.parent_session: ForkParent | None = None

    def show_origin(self, parent: ForkParent | None, label: str | None) -> None:
        """Name the parent (``label``: its title; ``None``: not listed, shown by id)."""
        self.parent_session = parent
        if parent is None:
            self.update("")
            return
        text = Text("↳ Forked from ")
        text.append(single_line(label or parent.id, LABEL_CHARS), "bold")
        text.append(f" at message #{parent.seq}")
        if label is None:
            text.append(" (not in your session list)", "italic")
        text.append(" · click or Enter opens it", "dim")
        self.update(text)

    def action_open_parent(self) -> None:
        if self.parent_session is not None:
            self.post_message(self.OpenParent(self, self.parent_session.id))

    def on_click(self) -> None:
        self.action_open_parent()


def history_widget(
    item: TranscriptItem, fetch: ReadEvents | None, make_widget: MakeWidget
) -> Widget | None:
    """The widget of a folded-history item or of a profile or fork event (``None``: the
    transcript draws the item as before)."""
    if item.kind == HISTORY:
        return HistoryFold(item.event, fetch, make_widget)
    if item.kind == "unknown":
        if item.event.type == SESSION_PROFILE:
            return ProfileNote(item.event)
        if item.event.type == SESSION_FORK and fork_parent(item.event) is not None:
            return ForkMark(item.event)
    return None
