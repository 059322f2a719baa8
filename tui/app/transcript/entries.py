"""The transcript's entries (a stored item, or the record of a live reply), the readers it
gets for more of them, and the widget each entry is shown with."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence

from textual.widget import Widget

from core.display import single_line
from core.jsondepth import elide_deep
from core.limits import MAX_JSON_DEPTH
from core.log import Event, message_text
from tui.app.transcript.cards import CheckpointCard, CollapsedItem, ReferenceCard
from tui.app.transcript.history import history_widget
from tui.app.transcript.messages import AssistantMessage, UserMessage
from tui.app.transcript.reply import ReplyRecord
from tui.app.transcript.text import (
    TimeFormat,
    as_mapping,
    checkpoint_text,
    cut_for_display,
    first_line,
    tool_result_text,
)
from tui.shared.items import TranscriptItem, event_preview

__all__ = ["Entry", "FetchEvents", "FetchSeqs", "FetchUnknown", "entry_widget"]

Entry = TranscriptItem | ReplyRecord
"""One item of the transcript: a stored item, or what a live reply has shown."""
FetchEvents = Callable[[Sequence[int]], Awaitable[Sequence[Event]]]
"""Reads the events with the given seqs (``SessionQuery.read_events_at`` for one session)."""
FetchSeqs = Callable[[], Awaitable[tuple[Sequence[int], int]]]
"""Reads every surface seq (node order) and the unknown events' floor
(``SessionQuery.read_surface_seqs`` for one session)."""
FetchUnknown = Callable[[int, int], Awaitable[Sequence[Event]]]
"""Reads the unknown (log-only) events with ``after < seq <= through``
(``SessionQuery.read_unknown_events`` for one session)."""


def _time(time_format: TimeFormat | None, event: Event) -> str:
    return time_format(event.time) if time_format is not None else ""


def entry_widget(
    entry: Entry,
    fetch: FetchEvents | None,
    make_widget: Callable[[Entry], Widget],
    time_format: TimeFormat | None,
) -> Widget:
    """The widget ``entry`` is shown with (``make_widget``, the transcript's, draws the items
    inside a folded history that ``fetch`` reads)."""
    if isinstance(entry, TranscriptItem):  # folded history, a profile or fork note
        special = history_widget(entry, fetch, make_widget)
        if special is not None:
            return special
    if isinstance(entry, ReplyRecord):
        if entry.event is not None:
            return AssistantMessage.from_event(entry.event, time_format=time_format)
        return AssistantMessage(
            entry.text, reasoning=entry.reasoning, status=entry.status, error=entry.error
        )
    event, data = entry.event, entry.event.data
    if entry.kind == "card" and entry.card is not None:
        return ReferenceCard(entry.card)
    if entry.kind == "user":
        return UserMessage(
            message_text(data), labels=entry.labels, time=_time(time_format, event), classes="user"
        )
    if entry.kind == "steering":
        return UserMessage(
            message_text(as_mapping(data.get("message"))),
            title="You (steering)",
            time=_time(time_format, event),
            classes="steering",
        )
    if entry.kind == "assistant":
        return AssistantMessage.from_event(event, time_format=time_format)
    if entry.kind == "checkpoint":
        summary = checkpoint_text(message_text(data))
        return CheckpointCard(cut_for_display(summary), detail=first_line(summary) or None)
    if entry.kind == "tool":
        message = as_mapping(data.get("message"))
        call = as_mapping(message.get("source")).get("callId")
        text, is_error = tool_result_text(message)
        title = "Tool result" + (f" {call}" if isinstance(call, str) and call else "")
        if is_error:
            title += " (error)"
        preview = first_line(text)
        return CollapsedItem(
            title + (f": {preview}" if preview else ""),
            cut_for_display(text),
            classes="tool-result",
        )
    if entry.kind == "context":
        source = as_mapping(data.get("source"))
        who = source.get("plugin") or source.get("kind") or "?"
        return CollapsedItem(
            f"Context from {who}", cut_for_display(message_text(data)), classes="context"
        )
    shown = elide_deep(data, MAX_JSON_DEPTH)  # older rows may nest deeper: "…"
    body = json.dumps(shown, ensure_ascii=False, indent=2, default=str)
    title = f"{single_line(event.type, 80)} event · {event_preview(event)}"
    return CollapsedItem(title, cut_for_display(body), classes="unknown")
