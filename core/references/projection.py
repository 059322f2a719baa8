"""Projection (SPEC §4.6): the plain conversation a referenced session contributes.

Only what the humans and the model actually said survives: tool traffic, reasoning,
plugin-injected context and earlier snapshots never leave their session.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, NamedTuple

from core.jsoncodec import FrozenDict, FrozenList, utf8_len
from core.log import (
    ASSISTANT_MESSAGE,
    STEERING_MESSAGE,
    USER_MESSAGE,
    Event,
    is_compact_checkpoint_source,
    message_text,
)

__all__ = [
    "NO_MESSAGE",
    "MessageSums",
    "ProjectedMessage",
    "message_code",
    "plain_message_bytes",
    "project_bodies",
    "project_surface",
    "projection_code",
]


class ProjectedMessage(NamedTuple):
    """One conversation item of a source; ``checkpoint`` marks a compaction summary."""

    role: Literal["user", "assistant"]
    text: str
    checkpoint: bool = False


_ROLES: dict[str, Literal["user", "assistant"]] = {
    USER_MESSAGE: "user",
    STEERING_MESSAGE: "user",
    ASSISTANT_MESSAGE: "assistant",
}
_MAPPINGS = (dict, Mapping)  # dict first: it is the cheap check
_new_tuple = tuple.__new__


def _text(message: Mapping[str, Any]) -> str:
    """``core.log.message_text``, with a fast path for what stores return (frozen
    containers, ``str`` texts); anything else takes ``message_text`` itself."""
    content = message.get("content")
    if type(content) is not FrozenList:
        return message_text(message)
    texts: list[str] = []
    for block in content:
        if type(block) is not FrozenDict:
            return message_text(message)
        if block.get("type") == "text":
            piece = block.get("text")
            if type(piece) is not str:
                return message_text(message)
            texts.append(piece)
    return texts[0] if len(texts) == 1 else "\n".join(texts)


class _Body(NamedTuple):
    """A surface event known only by its type and data (what projection reads of it)."""

    type: str
    data: Any
    surface_op: str = "append"


def project_bodies(bodies: Iterable[tuple[str, Any]]) -> list[ProjectedMessage]:
    """``project_surface`` of surface events given as their ``(type, data)`` (as
    ``read_bodies_at`` reads them): the same rule, for events of the folded surface."""
    return project_surface(_new_tuple(_Body, (kind, data, "append")) for kind, data in bodies)


def project_surface(events: Iterable[Event | _Body]) -> list[ProjectedMessage]:
    """Project a folded surface (in surface order); log-only events are ignored too.

    One loop, run for every event of every source: kept flat on purpose."""
    out: list[ProjectedMessage] = []
    append = out.append
    roles = _ROLES
    for event in events:
        kind = event.type
        role = roles.get(kind)
        if role is None or event.surface_op is None:
            continue
        message: Any = event.data
        if kind != USER_MESSAGE:
            message = message.get("message") if isinstance(message, _MAPPINGS) else None
        if not isinstance(message, _MAPPINGS):
            continue
        source = message.get("source")
        checkpoint = False
        if not isinstance(source, _MAPPINGS) or source.get("kind") != "user":
            if kind == USER_MESSAGE:
                checkpoint = is_compact_checkpoint_source(source)
                if not checkpoint:
                    continue
            elif kind == STEERING_MESSAGE:
                continue
        text = _text(message)
        if text:
            # tuple.__new__: the NamedTuple's own __new__ is a Python function
            append(_new_tuple(ProjectedMessage, (role, text, checkpoint)))
    return out


NO_MESSAGE = -1
"""``projection_code`` of an event that projects to no message."""


def projection_code(event: Event) -> int:
    """What ``project_surface`` makes of this one surface event, as one int a store can
    keep beside it: ``NO_MESSAGE``, or ``4 * UTF-8 bytes of the text + 2 * checkpoint +
    (1 for the assistant)``. Projection looks at each event alone, so the codes of a
    surface's events say which of them give messages, and how long, without their data."""
    out = project_surface((event,))
    if not out:
        return NO_MESSAGE
    message = out[0]
    return message_code(message.role, message.checkpoint, utf8_len(message.text))


def message_code(role: str, checkpoint: bool, utf8_bytes: int) -> int:
    """The ``projection_code`` of a message with this role, checkpoint flag and text of
    ``utf8_bytes`` UTF-8 bytes."""
    return utf8_bytes * 4 + (2 if checkpoint else 0) + (1 if role == "assistant" else 0)


def plain_message_bytes(code: int | None) -> int | None:
    """The UTF-8 bytes of the text of a message that is not a checkpoint, from its
    ``projection_code``; ``None`` for a checkpoint, no message, or no code at all (the
    stores' running sums of a surface count exactly these messages)."""
    if code is None or code < 0 or code & 2:
        return None
    return code >> 2


class MessageSums:
    """The stores' running sums of a surface: the count and UTF-8 bytes of its messages
    that are not checkpoints (exactly those ``plain_message_bytes`` measures). ``add`` a
    node's projection code as it joins the surface, ``remove`` one a replace shadows;
    other codes change nothing."""

    __slots__ = ("bytes", "messages")

    def __init__(self, codes: Iterable[int | None] = ()) -> None:
        self.messages = 0
        self.bytes = 0
        for code in codes:
            self.add(code)

    def add(self, code: int | None) -> None:
        size = plain_message_bytes(code)
        if size is not None:
            self.messages += 1
            self.bytes += size

    def remove(self, code: int | None) -> None:
        size = plain_message_bytes(code)
        if size is not None:
            self.messages -= 1
            self.bytes -= size
