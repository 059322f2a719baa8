"""The ``@`` mention rules of the composer: when a typed ``@`` opens the picker, what the
picker searches for while the user types, and the per-message reference limit.
Textual-free; the ``Composer`` and the picker only call these.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["at_limit", "mention_query", "opens_picker", "refuses_pick"]


def opens_picker(char_before: str) -> bool:
    """A typed ``@`` opens the picker at the start of a line or after whitespace
    (``char_before`` is ``""`` at the start); after a word (``me@example``) it is text."""
    return char_before == "" or char_before.isspace()


def mention_query(line: str, at_col: int, cursor_col: int) -> str | None:
    """What the picker searches for: the text between the ``@`` at ``at_col`` of ``line``
    and the cursor on the same line; ``None`` when the cursor left it (at or before the
    ``@``, the ``@`` is gone, or a space was typed: the mention was given up)."""
    if cursor_col <= at_col or at_col >= len(line) or line[at_col] != "@":
        return None
    query = line[at_col + 1 : cursor_col]
    if any(char.isspace() for char in query):
        return None
    return query


def at_limit(reference_count: int, max_references: int) -> bool:
    """The draft references as many sessions as one message may (or more)."""
    return reference_count >= max_references


def refuses_pick(referenced: Iterable[str], session_id: str, max_references: int) -> bool:
    """Picking ``session_id`` would reference one session too many (a session already
    referenced may be mentioned again: it counts once)."""
    sessions = set(referenced)
    return session_id not in sessions and at_limit(len(sessions), max_references)
