"""The log-only events of issue 32 as a reader sees them: a profile switch and a fork's
origin, read from data that may be anything (a log written by hand, another member's).

Shared by ``dsh sessions``, ``dsh show`` and the Markdown export (no drawing library):
``profile_line`` and ``fork_line`` give one safe line, or ``None`` when the data is not
what dsh writes (the event then shows as any unknown one does).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from core.display import single_line
from core.log import SESSION_FORK, SESSION_PROFILE, Event

__all__ = ["ForkOrigin", "fork_line", "fork_origin", "log_event_line", "profile_line"]

NAME_CHARS = 64
"""How much of a recorded profile name a line keeps (configured names are at most 64)."""


@dataclass(frozen=True, slots=True)
class ForkOrigin:
    """The session a fork was made from, and the seq of the last message taken over."""

    parent_id: str
    seq: int


def fork_origin(event: Event | None) -> ForkOrigin | None:
    """The parent named by a ``session/fork`` event (``None``: none, or malformed)."""
    if event is None or event.type != SESSION_FORK:
        return None
    parent = event.data.get("parent")
    if not isinstance(parent, Mapping):
        return None
    parent_id, seq = parent.get("id"), parent.get("seq")
    if not isinstance(parent_id, str) or not isinstance(seq, int) or isinstance(seq, bool):
        return None
    return ForkOrigin(parent_id, seq)


def profile_line(event: Event) -> str | None:
    """``profile: work (openai, deepseek-chat)`` for a ``session/profile`` event."""
    if event.type != SESSION_PROFILE:
        return None
    name = event.data.get("profile")
    if not isinstance(name, str):
        return None
    details = [
        single_line(value, 80)
        for value in (event.data.get("provider"), event.data.get("model"))
        if isinstance(value, str) and value
    ]
    shown = f"profile: {single_line(name, NAME_CHARS)}"
    return f"{shown} ({', '.join(details)})" if details else shown


def fork_line(event: Event) -> str | None:
    """``forked from <id> at seq N`` for a ``session/fork`` event."""
    origin = fork_origin(event)
    if origin is None:
        return None
    return f"forked from {single_line(origin.parent_id)} at seq {origin.seq}"


def log_event_line(event: Event) -> str | None:
    """The line for a profile switch or a fork's origin; ``None`` for any other event."""
    return profile_line(event) or fork_line(event)
