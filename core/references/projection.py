"""Projection (SPEC §4.6): the plain conversation a referenced session contributes.

Only what the humans and the model actually said survives: tool traffic, reasoning,
plugin-injected context and earlier snapshots never leave their session.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, NamedTuple

from core.log import (
    ASSISTANT_MESSAGE,
    STEERING_MESSAGE,
    USER_MESSAGE,
    Event,
    is_compact_checkpoint_source,
    message_text,
)

__all__ = ["ProjectedMessage", "project_surface"]


class ProjectedMessage(NamedTuple):
    """One conversation item of a source; ``checkpoint`` marks a compaction summary."""

    role: Literal["user", "assistant"]
    text: str
    checkpoint: bool = False


def _text(message: Mapping[str, Any]) -> str:
    """``core.log.message_text`` with a fast path for the plain/frozen dicts stores return."""
    content = message.get("content")
    if not isinstance(content, list):
        return message_text(message)
    texts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            return message_text(message)
        if block.get("type") == "text":
            text = block.get("text")
            if isinstance(text, str):
                texts.append(text)
    return texts[0] if len(texts) == 1 else "\n".join(texts)


_MAPPINGS = (dict, Mapping)  # dict first: it is the cheap check (inlined: a hot loop)


def _project(event: Event) -> ProjectedMessage | None:
    kind = event.type
    message: Any
    if kind == USER_MESSAGE:
        message = event.data
        role: Literal["user", "assistant"] = "user"
    elif kind in (ASSISTANT_MESSAGE, STEERING_MESSAGE):
        data: Any = event.data
        if not isinstance(data, _MAPPINGS):
            return None
        message = data.get("message")
        role = "assistant" if kind == ASSISTANT_MESSAGE else "user"
    else:
        return None
    if not isinstance(message, _MAPPINGS):
        return None
    source = message.get("source")
    source_kind = source.get("kind") if isinstance(source, _MAPPINGS) else None
    checkpoint = False
    if kind == USER_MESSAGE:
        if source_kind != "user":
            checkpoint = is_compact_checkpoint_source(source)
            if not checkpoint:
                return None
    elif kind == STEERING_MESSAGE and source_kind != "user":
        return None
    text = _text(message)
    if not text:
        return None
    return ProjectedMessage(role, text, checkpoint)


def project_surface(events: Iterable[Event]) -> list[ProjectedMessage]:
    """Project a folded surface (in surface order); log-only events are ignored too."""
    out: list[ProjectedMessage] = []
    for event in events:
        if event.surface_op is None:
            continue
        item = _project(event)
        if item is not None:
            out.append(item)
    return out
