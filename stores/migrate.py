"""Copying every session from one store to another, losslessly (``dsh migrate``).

Each session travels in one ``import_session`` (its header and its whole log with the same
seqs, times, data, surface operations and provenance: all or nothing), so a copy that is
interrupted leaves whole sessions only, and running it again finishes the job:

- a session the target lacks is imported;
- a session the target holds with the same header and a log that is a prefix of the
  source's gets the missing events appended (nothing at all when it is complete), so
  running it again after more work in the source brings the target up to date;
- a session the target holds otherwise (another header, a log that differs) is a
  *conflict*: it is left alone and reported, never overwritten.

Reply leases are not copied: they belong to running processes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from core.errors import SessionNotFoundError
from core.log import Event, NewEvent, SessionHeader
from core.store import SessionStore

__all__ = ["MigrationReport", "SessionOutcome", "migrate_sessions"]


@dataclass(frozen=True)
class SessionOutcome:
    """What happened to one session: ``copied``, ``extended``, ``present`` or ``conflict``."""

    session_id: str
    outcome: str
    events: int  # events written to the target for this session


@dataclass
class MigrationReport:
    total: int = 0
    copied: int = 0
    extended: int = 0
    present: int = 0
    events: int = 0
    conflicts: list[str] = field(default_factory=list)


def _as_new(event: Event) -> NewEvent:
    return NewEvent(
        event.type, event.data, event.surface_op, event.source_event_seqs, time=event.time
    )


async def migrate_sessions(
    source: SessionStore,
    target: SessionStore,
    *,
    progress: Callable[[int, int, SessionOutcome], None] | None = None,
) -> MigrationReport:
    """Copy every session of ``source`` into ``target`` (see the module doc); ``progress``
    is called after each session with its 1-based position, the total and its outcome."""
    headers = await source.list_headers()
    report = MigrationReport(total=len(headers))
    for position, header in enumerate(headers, 1):
        events = await source.read_events(header.id)
        outcome = await _migrate_one(target, header, events)
        if outcome.outcome == "copied":
            report.copied += 1
        elif outcome.outcome == "extended":
            report.extended += 1
        elif outcome.outcome == "present":
            report.present += 1
        else:
            report.conflicts.append(header.id)
        report.events += outcome.events
        if progress is not None:
            progress(position, report.total, outcome)
    return report


async def _migrate_one(
    target: SessionStore, header: SessionHeader, events: list[Event]
) -> SessionOutcome:
    sid = header.id
    try:
        there = await target.read_header(sid)
    except SessionNotFoundError:
        await target.import_session(header, [_as_new(e) for e in events])
        return SessionOutcome(sid, "copied", len(events))
    if there != header:
        return SessionOutcome(sid, "conflict", 0)
    have = await target.read_events(sid)
    if have != events[: len(have)]:
        return SessionOutcome(sid, "conflict", 0)
    missing = events[len(have) :]
    if not missing:
        return SessionOutcome(sid, "present", 0)
    await target.append_batch(sid, [_as_new(e) for e in missing])
    return SessionOutcome(sid, "extended", len(missing))
