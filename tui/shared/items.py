"""Surface events classified for display: which are user messages, reference cards,
compaction checkpoints, replies, steering, tool results or unknown.

Plain data with no drawing library, shared by the app, ``dsh show``, export and the ACP replay.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from core.cards import ReferenceCard, parse_reference_card
from core.display import single_line
from core.jsondepth import elide_deep
from core.limits import MAX_JSON_DEPTH
from core.log import (
    ASSISTANT_MESSAGE,
    STEERING_MESSAGE,
    SURFACE_EVENT_TYPES,
    TOOL_RESULT,
    USER_MESSAGE,
    Event,
    is_compact_checkpoint_source,
)

__all__ = [
    "PREVIEW_CHARS",
    "TranscriptItem",
    "classify_surface",
    "event_preview",
    "iter_classified",
    "with_unknown_events",
]

PREVIEW_CHARS = 160
"""An unknown event's one-line JSON preview is cut past this many characters."""


@dataclass(frozen=True, slots=True)
class TranscriptItem:
    """One surface event, classified for display."""

    kind: str  # user, assistant, card, checkpoint, steering, tool, context, unknown
    # (unknown: an event of a type dsh does not know, log-only, shown collapsed)
    event: Event
    card: ReferenceCard | None = None
    labels: tuple[str, ...] = ()  # mention labels to highlight in a user message


def classify_surface(events: Sequence[Event]) -> list[TranscriptItem]:
    return list(iter_classified(events))


def iter_classified(events: Iterable[Event]) -> Iterator[TranscriptItem]:
    """``classify_surface`` one event at a time (a transcript printed as it is read)."""
    labels: tuple[str, ...] = ()
    for event in events:
        data = event.data
        if event.surface_op is None and event.type not in SURFACE_EVENT_TYPES:
            # A log-only event of a type dsh does not know: labels carry over it.
            yield TranscriptItem("unknown", event)
            continue
        if event.type == USER_MESSAGE:
            source = data.get("source")
            kind = source.get("kind") if isinstance(source, Mapping) else None
            card = parse_reference_card(data)
            if card is not None:
                yield TranscriptItem("card", event, card)
                labels = tuple(s.label for s in card.sources)
                continue
            if is_compact_checkpoint_source(source):
                yield TranscriptItem("checkpoint", event)
            elif kind == "user":
                yield TranscriptItem("user", event, labels=labels)
            else:
                yield TranscriptItem("context", event)
        elif event.type == ASSISTANT_MESSAGE:
            yield TranscriptItem("assistant", event)
        elif event.type == STEERING_MESSAGE:
            yield TranscriptItem("steering", event)
        elif event.type == TOOL_RESULT:
            yield TranscriptItem("tool", event)
        else:
            yield TranscriptItem("unknown", event)
        labels = ()


def with_unknown_events(events: Sequence[Event], unknown: Sequence[Event]) -> list[Event]:
    """Surface ``events`` (node order) with ``unknown`` log-only events (seq order) put in
    place: each right before the first surface event with a higher seq, the rest at the
    end. (Unknown events come after the surface's newest replace, and every surface
    event after that is an append, so this is their order in the log.)"""
    if not unknown:
        return list(events)
    out: list[Event] = []
    pending = iter(unknown)
    waiting = next(pending, None)
    for event in events:
        while waiting is not None and waiting.seq < event.seq:
            out.append(waiting)
            waiting = next(pending, None)
        out.append(event)
    while waiting is not None:
        out.append(waiting)
        waiting = next(pending, None)
    return out


def event_preview(event: Event, limit: int = PREVIEW_CHARS) -> str:
    """An event's data as one safe line of compact JSON (every control, bidi or invisible
    character escaped), cut past ``limit`` characters with a notice of how many more."""
    shown = elide_deep(event.data, MAX_JSON_DEPTH)  # older rows may nest deeper: "…"
    text = json.dumps(shown, ensure_ascii=False, separators=(",", ":"), default=str)
    line = single_line(text)
    if len(line) <= limit:
        return line
    return single_line(line[:limit]) + f"… [{len(line) - limit:,} more characters]"
