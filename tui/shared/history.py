"""A session's whole conversation, as written: what a compaction (or any replace) took off
the current surface stays in, marked. The surface is what the model sees next; a person
reading an export wants everything that was said."""

from __future__ import annotations

from collections.abc import Iterable

from core.log import SESSION_FORK, SESSION_PROFILE, Event, Replace, is_compact_checkpoint_source

__all__ = ["COMPACTED", "REPLACED", "in_history", "taken_off", "whole_history"]

COMPACTED = "compacted"
"""Taken off the surface by a compaction (the summary that replaced it comes after it)."""
REPLACED = "replaced"
"""Taken off the surface by another replace."""

_HISTORY_MARKS = frozenset({SESSION_PROFILE, SESSION_FORK})
"""The log-only marks a reader of the whole conversation sees (``tui.shared.logevents``
draws each). Not every type of ``core.log.SESSION_MARK_TYPES``: an imported session's
``session/source`` has no line of its own there yet."""


def in_history(event: Event) -> bool:
    """Whether a reader of the whole conversation sees ``event``: every surface event, and
    the log-only marks of what answered and where the session comes from (a profile
    switch, a fork's origin); not chunks, titles or compaction bookkeeping."""
    return event.surface_op is not None or event.type in _HISTORY_MARKS


def whole_history(events: Iterable[Event]) -> tuple[list[Event], dict[int, str]]:
    """Every event of the raw log ``events`` a reader sees (``in_history``), in the order
    written, and which of them are no longer on the surface (``taken_off``)."""
    history = [event for event in events if in_history(event)]
    return history, taken_off(history)


def taken_off(events: Iterable[Event]) -> dict[int, str]:
    """Which surface events of the raw log ``events`` are no longer on the surface: seq →
    ``COMPACTED`` or ``REPLACED``. (The surface is folded as SPEC §2.3 says, so exactly the
    shadowed events are marked.) One pass, holding only the surface's seqs: ``dsh export``
    reads a log of any size through it, page by page."""
    taken: dict[int, str] = {}
    nodes: list[int] = []  # the current surface, by seq, in node order
    for event in events:
        op = event.surface_op
        if op is None:
            continue  # log-only (chunks, titles, compaction bookkeeping)
        if not isinstance(op, Replace):
            nodes.append(event.seq)
            continue
        how = COMPACTED if is_compact_checkpoint_source(event.data.get("source")) else REPLACED
        if op.start in nodes and op.end in nodes:
            first, last = nodes.index(op.start), nodes.index(op.end)
            shadowed, nodes[first : last + 1] = nodes[first : last + 1], [event.seq]
        else:  # a log the store let through anyway: trust what the event lists
            shadowed = list(event.source_event_seqs or ())
            nodes = [seq for seq in nodes if seq not in shadowed] + [event.seq]
        for seq in shadowed:
            taken[seq] = how
    return taken
