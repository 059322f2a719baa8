"""The streaming assistant reply (``ReplyView``) and what it has shown (``ReplyRecord``, kept
so the reply can be mounted again after paging). Its body is the one a stored reply gets
(``reply_body``), so a reply looks the same live and after a reload."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from rich.text import Text
from textual.app import ComposeResult
from textual.await_complete import AwaitComplete
from textual.binding import BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Static

from core.display import escape_control, single_line
from core.log import Event
from tui.app.transcript.cards import CollapsedItem
from tui.app.transcript.navigation import MESSAGE_BINDINGS, MessageItem
from tui.app.transcript.text import (
    MAX_SHOWN_CHARS,
    cut_for_display,
    format_time,
    header_text,
    reply_body,
    status_marker,
)
from tui.shared.render import GrowingMarkdown, LiteralMarkdown

__all__ = ["FLUSH_INTERVAL", "ReplyRecord", "ReplyView", "Status", "done_already"]

FLUSH_INTERVAL = 0.05
"""Streaming text is rendered again at most this often (seconds)."""
Status = Literal["completed", "interrupted", "error"]


def done_already() -> AwaitComplete:
    """An already finished awaitable, for calls that have nothing to do."""

    async def nothing() -> None:
        return None

    return AwaitComplete(nothing())


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
        self._header = Static(header_text("Assistant", []), classes="message-header", markup=False)
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
                        "Thinking…", cut_for_display(self.record.reasoning), classes="reasoning"
                    )
                    self._thinking.display = False  # the fold's "Thinking…" says it
                    await self.mount(self._reasoning, before=self._body)
                else:
                    self._reasoning.set_body(cut_for_display(self.record.reasoning))
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
            return done_already()
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
                    header_text(
                        "Assistant",
                        [
                            single_line(str(model), 60) if model else "",
                            fmt(stored.time) if fmt is not None else "",
                        ],
                    )
                )
            marker = status_marker(normalized, error_message)
            if marker is not None:
                self._marker.update(marker)
                self._marker.set_class(normalized == "error", "-error")
                self._marker.set_class(normalized == "interrupted", "-interrupted")
                self._marker.display = True
            self.post_message(self.Finished(self))

        return AwaitComplete(finishing())


# --------------------------------------------------------------------------- transcript
