"""What the app is busy with: one value that the status line and the key bindings follow.

Textual-free so the rules can be read (and tested) on their own: while the app creates a
session, prepares a message, streams a reply or compacts, the actions that would change
the open session or what it holds cannot run; the footer hides them until it is done.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["IDLE", "Activity", "Busy", "action_available", "busy_reason"]


class Busy(enum.Enum):
    """The one thing the app is doing that keeps other work out."""

    IDLE = "idle"
    CREATING = "creating"  # Ctrl+N: a new session is being stored
    PREPARING = "preparing"  # the referenced sessions of a message are being read
    STREAMING = "streaming"  # a reply is arriving (or waiting to retry)
    COMPACTING = "compacting"  # F4: the model is summarising the session
    CONNECTING = "connecting"  # at start: the store's server cannot be reached yet


@dataclass(frozen=True)
class Activity:
    """The busy state and the words the status line shows for it (``None``: hidden)."""

    state: Busy = Busy.IDLE
    status: str | None = None

    @property
    def busy(self) -> bool:
        return self.state is not Busy.IDLE


IDLE = Activity()

EXCLUSIVE_ACTIONS = frozenset({"new_session", "compact_session", "delete_session", "answer_again"})
"""Actions (by their Textual action name) that store something or change which session is
open: one at a time, never beside a reply, a preparation, a compaction or a creation."""


def action_available(action: str, state: Busy) -> bool:
    """Whether ``action`` may run while the app is in ``state`` (other conditions, such as
    an open session, are the app's to add)."""
    return state is Busy.IDLE or action not in EXCLUSIVE_ACTIONS


_REASONS = {
    Busy.CREATING: "a new session is being created",
    Busy.PREPARING: "the last message is being prepared",
    Busy.STREAMING: "a reply is arriving",
    Busy.COMPACTING: "the session is being compacted",
    Busy.CONNECTING: "dsh is waiting for the server",
}


def busy_reason(state: Busy) -> str:
    """Why the app is busy, as the end of a sentence ('' when idle)."""
    return _REASONS.get(state, "")
