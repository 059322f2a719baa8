"""Surface events classified for display: which are user messages, reference cards,
compaction checkpoints, replies, steering, tool results or unknown.

Plain data with no drawing library, shared by the app, ``dsh show``, export and the ACP replay.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from core.cards import ReferenceCard, parse_reference_card
from core.log import (
    ASSISTANT_MESSAGE,
    STEERING_MESSAGE,
    TOOL_RESULT,
    USER_MESSAGE,
    Event,
    is_compact_checkpoint_source,
)

__all__ = ["TranscriptItem", "classify_surface"]


@dataclass(frozen=True, slots=True)
class TranscriptItem:
    """One surface event, classified for display."""

    kind: str  # user, assistant, card, checkpoint, steering, tool, context, unknown
    event: Event
    card: ReferenceCard | None = None
    labels: tuple[str, ...] = ()  # mention labels to highlight in a user message


def classify_surface(events: Sequence[Event]) -> list[TranscriptItem]:
    items: list[TranscriptItem] = []
    labels: tuple[str, ...] = ()
    for event in events:
        data = event.data
        if event.type == USER_MESSAGE:
            source = data.get("source")
            kind = source.get("kind") if isinstance(source, Mapping) else None
            card = parse_reference_card(data)
            if card is not None:
                items.append(TranscriptItem("card", event, card))
                labels = tuple(s.label for s in card.sources)
                continue
            if is_compact_checkpoint_source(source):
                items.append(TranscriptItem("checkpoint", event))
            elif kind == "user":
                items.append(TranscriptItem("user", event, labels=labels))
            else:
                items.append(TranscriptItem("context", event))
        elif event.type == ASSISTANT_MESSAGE:
            items.append(TranscriptItem("assistant", event))
        elif event.type == STEERING_MESSAGE:
            items.append(TranscriptItem("steering", event))
        elif event.type == TOOL_RESULT:
            items.append(TranscriptItem("tool", event))
        else:
            items.append(TranscriptItem("unknown", event))
        labels = ()
    return items
