"""Copying every session from one store to another, losslessly (``dsh migrate``).

Each session travels in one ``import_session`` (its header and its whole log with the same
seqs, times, data, surface operations and provenance: all or nothing), so a copy that is
interrupted leaves whole sessions only, and running it again finishes the job:

- a session the target lacks is imported;
- a session the target holds with the same header and a log that is a prefix of the
  source's gets the missing events appended (nothing at all when it is complete), so
  running it again after more work in the source brings the target up to date;
- a session the target holds otherwise (another header, a log that differs) is a
  *conflict*: it is left alone and reported, never overwritten;
- a session the target refuses (an id, cwd or title over ``core.limits``) is *invalid*:
  reported with the reason and skipped.

Two migrations may run at once (issue 30): a session another one imported first is
compared like any session found there, and the missing events of a session are appended
under its reply lease, read again once it is held, so they are never appended twice. A
lease another process keeps past a few retries leaves the session *busy* (run it again).
Reply leases are not copied: they belong to running processes.

Owners and grants travel too (issue 17). A session the migrating user owns in the source
is theirs in the target (on SQLite the OS user, on PostgreSQL the role they connect as:
the names may differ), and every grant on it is made again in the target (a grantee the
target does not know is reported, not fatal). A session owned by someone else (shared
with the user) keeps its owner; a target that enforces ownership (PostgreSQL's row
security) refuses to store it for anyone but that owner, so it is reported as *foreign*
and left for its owner to migrate.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from core.errors import (
    InvalidEventError,
    SessionExistsError,
    SessionNotFoundError,
    SessionReadOnlyError,
    ShareError,
)
from core.leases import lease_owner, lease_owner_is_dead
from core.log import Event, NewEvent, SessionHeader
from core.store import SessionStore

__all__ = ["MigrationReport", "SessionOutcome", "migrate_sessions"]


LEASE_TTL_MS = 60_000
"""How long a migration's lease on one target session lasts (it reads and appends once)."""

LEASE_WAITS_S = (0.1, 0.2, 0.4, 0.8, 1.6)
"""The pauses between tries of a lease another process holds, before *busy*."""


@dataclass(frozen=True)
class SessionOutcome:
    """What happened to one session: ``copied``, ``extended``, ``present``, ``conflict``,
    ``foreign`` (another user's), ``invalid`` (refused by the target, ``reason`` says
    why) or ``busy`` (its lease held elsewhere): see the module doc."""

    session_id: str
    outcome: str
    events: int  # events written to the target for this session
    owner: str | None = None  # its owner in the target
    shares: int = 0  # grants made in the target
    reason: str = ""  # why an invalid session was refused


@dataclass
class MigrationReport:
    total: int = 0
    copied: int = 0
    extended: int = 0
    present: int = 0
    events: int = 0
    conflicts: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)
    shares: int = 0
    share_problems: list[str] = field(default_factory=list)


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
        # Your sessions stay yours, whatever your name is on either side.
        mine = header.owner is None or header.owner == source.current_user()
        header = replace(header, owner=target.current_user() if mine else header.owner)
        outcome = await _migrate_one(target, header, events)
        if mine and outcome.outcome in ("copied", "extended", "present"):
            outcome = replace(
                outcome, shares=await _carry_shares(source, target, header.id, report)
            )
            report.shares += outcome.shares
        if outcome.outcome == "foreign":
            report.foreign.append(header.id)
        elif outcome.outcome == "invalid":
            report.invalid.append(header.id)
        elif outcome.outcome == "busy":
            report.busy.append(header.id)
        elif outcome.outcome == "copied":
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
    sid, owner = header.id, header.owner
    try:
        there = await target.read_header(sid)
    except SessionNotFoundError:
        try:
            await target.import_session(header, [_as_new(e) for e in events])
        except SessionReadOnlyError:
            return SessionOutcome(sid, "foreign", 0, owner)
        except InvalidEventError as err:
            return SessionOutcome(sid, "invalid", 0, owner, reason=str(err))
        except SessionExistsError:  # made meanwhile (another migration?): look at it
            try:
                there = await target.read_header(sid)
            except SessionNotFoundError:  # there, but not for this user to see
                return SessionOutcome(sid, "conflict", 0)
        else:
            return SessionOutcome(sid, "copied", len(events), owner)
    if there != header:
        return SessionOutcome(sid, "conflict", 0, there.owner)
    judged = _judge(sid, there, await target.read_events(sid), events)
    if judged is not None:
        return judged
    return await _extend(target, there, events)


def _judge(
    sid: str, there: SessionHeader, have: list[Event], events: list[Event]
) -> SessionOutcome | None:
    """``present`` or ``conflict`` for the target's log ``have``; ``None``: it is a proper
    prefix of the source's ``events`` (the rest is to be appended)."""
    if have != events[: len(have)]:
        return SessionOutcome(sid, "conflict", 0, there.owner)
    if len(have) == len(events):
        return SessionOutcome(sid, "present", 0, there.owner)
    return None


async def _extend(
    target: SessionStore, there: SessionHeader, events: list[Event]
) -> SessionOutcome:
    """Append what the target's session lacks, under its reply lease, reading it again
    once the lease is held: another migration may have appended it meanwhile."""
    sid = there.id
    holder = lease_owner()
    try:
        for pause in (*LEASE_WAITS_S, None):
            if await target.take_reply_lease(
                sid, holder, ttl_ms=LEASE_TTL_MS, dead=lease_owner_is_dead
            ):
                break
            if pause is None:
                return SessionOutcome(sid, "busy", 0, there.owner)
            await asyncio.sleep(pause)
    except SessionReadOnlyError:
        return SessionOutcome(sid, "foreign", 0, there.owner)
    try:
        have = await target.read_events(sid)
        judged = _judge(sid, there, have, events)
        if judged is not None:
            return judged
        missing = events[len(have) :]
        try:
            await target.append_batch(sid, [_as_new(e) for e in missing])
        except SessionReadOnlyError:
            return SessionOutcome(sid, "foreign", 0, there.owner)
        except InvalidEventError as err:
            return SessionOutcome(sid, "invalid", 0, there.owner, reason=str(err))
        return SessionOutcome(sid, "extended", len(missing), there.owner)
    finally:
        await target.release_reply_lease(sid, holder)


async def _carry_shares(
    source: SessionStore, target: SessionStore, sid: str, report: MigrationReport
) -> int:
    """Make the source's grants on one's own session ``sid`` in the target too."""
    made = 0
    for grant in await source.list_shares(sid):
        if grant.grantee == target.current_user():
            continue  # owning it there says more
        try:
            made += await target.share(sid, grant.grantee)
        except (ShareError, SessionReadOnlyError) as err:
            report.share_problems.append(f"{sid}: {err}")
    return made
