"""Rows a store could not read (issue 30): in a team store another member's rows are
untrusted input, and one damaged row costs one line, never the listing it is part of.

A store's listings (``list_headers``, ``read_titles``) skip such rows and keep what they
skipped (``SessionStore.damaged_rows``); hosts tell their user in one line per row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from core.display import single_line

__all__ = ["DamagedRow", "damage_line", "damage_notice"]


@dataclass(frozen=True, slots=True)
class DamagedRow:
    """One row a listing skipped: a whole ``session`` (its header cannot be read: it is
    left out of the list) or its ``title`` (the session is listed without one).
    ``session_id`` when it could be read; ``owner`` (the role that owns the session) when
    known; ``reason`` in plain words ("its cwd is not valid UTF-8")."""

    what: Literal["session", "title"]
    reason: str
    owner: str | None = None
    session_id: str | None = None


def damage_line(row: DamagedRow) -> str:
    """What a host prints for ``row``: one line, every untrusted part escaped and cut."""
    whose = f" owned by {single_line(row.owner, 40)}" if row.owner else ""
    named = f" {single_line(row.session_id, 60)}" if row.session_id is not None else ""
    if row.what == "title":
        return f"the title of session{named}{whose} is damaged and not shown ({row.reason})"
    return f"a session{named}{whose} is damaged and not listed ({row.reason})"


def damage_notice(rows: Sequence[DamagedRow]) -> str:
    """One line for a host's notice line about ``rows`` (at least one): how many sessions
    could not be read, the first row's line, and how many more there are."""
    count = len(rows)
    sessions = "1 session" if count == 1 else f"{count:,} sessions"
    more = f" (and {count - 1:,} more)" if count > 1 else ""
    return f"{sessions} could not be read: {damage_line(rows[0])}{more}"
