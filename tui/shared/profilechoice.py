"""Which profile a session uses: the one its log records, else the default (also when the
recorded one is no longer configured, with a note). Light (the config and the log's types
only): ``dsh sessions`` resolves every session's profile without the runtime."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.config import DshConfig
    from core.log import Event
    from core.profiles import Profile

__all__ = ["RECORDED_NAME_CHARS", "SessionProfile", "profile_event_name", "resolve_profile"]

RECORDED_NAME_CHARS = 64
"""How much of a recorded profile name that is not configured (so never checked) a note
shows."""


@dataclass
class SessionProfile:
    """The profile a session uses now. ``recorded`` is the name its log holds (``None``:
    none, it follows the default); ``note`` says why another one is used (a recorded
    profile no longer configured)."""

    profile: Profile
    recorded: str | None = None
    note: str | None = None


def profile_event_name(event: Event | None) -> str | None:
    """The profile a ``session/profile`` event names (``None``: none, or not a string)."""
    if event is None:
        return None
    name = event.data.get("profile")
    return name if isinstance(name, str) else None


def resolve_profile(config: DshConfig, recorded: str | None) -> SessionProfile:
    """The profile of a session whose log records ``recorded`` (see ``SessionProfile``)."""
    default = config.profile()
    if recorded is None:
        return SessionProfile(default)
    found = config.profiles.get(recorded)
    if found is None:
        shown = recorded  # a hostile log's name: repr escapes it, the cut bounds it
        if len(shown) > RECORDED_NAME_CHARS:
            shown = shown[: RECORDED_NAME_CHARS - 1] + "…"
        note = f"profile {shown!r} is not configured any more; using {default.name!r}"
        return SessionProfile(default, recorded, note)
    return SessionProfile(found, recorded)
