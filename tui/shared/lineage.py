"""Where a fork came from: the parent a ``session/fork`` event names, read defensively.

The event is the first of a fork's log (``core.control.fork_session``), but a log is
hostile input like any other: an event whose data is not ``{"parent": {"id": str,
"seq": int}}`` names no parent (the session is shown as an ordinary one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from core.log import SESSION_FORK, Event

__all__ = ["ForkParent", "fork_parent"]


class ForkParent(NamedTuple):
    """The session a fork was made from and the seq of the last message taken over."""

    id: str
    seq: int


def fork_parent(event: Event | None) -> ForkParent | None:
    """The parent a ``session/fork`` event names (``None``: no such event, or malformed)."""
    if event is None or event.type != SESSION_FORK:
        return None
    parent = event.data.get("parent")
    if not isinstance(parent, Mapping):
        return None
    session_id, seq = parent.get("id"), parent.get("seq")
    if not isinstance(session_id, str) or isinstance(seq, bool) or not isinstance(seq, int):
        return None
    return ForkParent(session_id, seq)
