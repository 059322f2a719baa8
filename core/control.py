"""Conversation control: retry, edit and resend, fork — all new events, history kept.

Retry and edit are surface operations like compaction (SPEC §2.3): the new reply, or the
edited message, takes the place of a run at the end of the surface with a ``Replace`` that
lists every seq it shadows, so the earlier attempt stays in the log and replay shows what
happened. A fork is a new session whose log starts with ``session/fork`` (its parent and
the seq of the last message taken over) and holds copies of the parent's surface up to
that message: an ordinary session, referenced like any other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import core.log as _log
from core.errors import DshError
from core.log import (
    SESSION_FORK,
    SESSION_PROFILE,
    SESSION_TITLE,
    STEERING_MESSAGE,
    USER_MESSAGE,
    Event,
    NewEvent,
    Replace,
    SessionHeader,
    new_message_id,
)
from core.query import SessionQueryLike
from core.store import SessionStore

__all__ = [
    "EditError",
    "ForkError",
    "edit_run",
    "fork_session",
    "fork_title",
    "is_direct_user_message",
    "replacing",
    "retry_run",
]

FORK_TITLE_MAX_CHARS = 60


class EditError(DshError):
    """The message asked for cannot be edited (not the user's, not on the surface)."""


class ForkError(DshError):
    """The seq asked for is not a message of the session's current conversation."""


def _source_kind(event: Event) -> object:
    if event.type != USER_MESSAGE:
        return None
    source = event.data.get("source")
    return source.get("kind") if isinstance(source, Mapping) else None


def is_direct_user_message(event: Event) -> bool:
    """A message the user typed (a ``user/message`` whose source kind is ``user``)."""
    return _source_kind(event) == "user"


def retry_run(surface: Sequence[Event]) -> tuple[int, ...] | None:
    """The seqs (node order) of the reply a retry replaces: every surface node after the
    last request (a user message of any source but a referenced-sessions snapshot, or a
    steering message). ``()`` when the request has no reply yet (a retry just answers it);
    ``None`` when there is no request to answer (an empty or compacted-only surface)."""
    for index in range(len(surface) - 1, -1, -1):
        event = surface[index]
        if event.type == STEERING_MESSAGE or is_direct_user_message(event):
            return tuple(e.seq for e in surface[index + 1 :])
        if event.type == USER_MESSAGE and _source_kind(event) not in ("session-reference",):
            # a checkpoint or a plugin's context: answerable only when something follows
            # it that was an answer (a reply to the conversation it summarises is not one)
            break
    return None


def edit_run(surface: Sequence[Event], seq: int) -> tuple[int, ...]:
    """The seqs (node order) an edit of the user's message ``seq`` replaces: from that
    message (or the referenced-sessions snapshot stored right before it) to the end of
    the surface. ``EditError`` when ``seq`` is not one of the user's own messages on it."""
    for index, event in enumerate(surface):
        if event.seq != seq:
            continue
        if not is_direct_user_message(event):
            raise EditError(f"seq {seq} is not one of your messages; only those can be edited")
        if index > 0 and _source_kind(surface[index - 1]) == "session-reference":
            index -= 1
        return tuple(e.seq for e in surface[index:])
    raise EditError(
        f"seq {seq} is not a message of the current conversation"
        " (it was edited, retried or compacted away, or never was one)"
    )


def replacing(batch: Sequence[NewEvent], run: Sequence[int]) -> list[NewEvent]:
    """``batch`` whose first event takes the place of ``run`` (listing it as its
    provenance); the rest are appended after it."""
    out = list(batch)
    out[0] = dataclasses.replace(
        out[0], surface_op=Replace(run[0], run[-1]), source_event_seqs=tuple(run)
    )
    return out


def fork_title(parent_title: str | None, parent_id: str) -> str:
    """``Fork of <title>`` (of the id when untitled), on one line, bounded."""
    shown = " ".join((parent_title or parent_id).split()) or parent_id
    title = f"Fork of {shown}"
    if len(title) > FORK_TITLE_MAX_CHARS:
        title = title[: FORK_TITLE_MAX_CHARS - 1].rstrip() + "…"
    return title


async def fork_session(
    store: SessionStore,
    query: SessionQueryLike,
    session_id: str,
    *,
    at_seq: int | None = None,
    title: str | None = None,
    profile: Mapping[str, Any] | None = None,
    new_id: str | None = None,
) -> SessionHeader:
    """A new session whose surface is ``session_id``'s up to the message ``at_seq`` (the
    whole surface when ``None``), in one transaction. Its log: ``session/fork``, copies of
    those messages (their times kept), the ``session/profile`` data given (the parent's
    profile, so the fork answers the same way), then the title (``title`` as the user's,
    else ``Fork of …``). The fork is the current user's own session, with the parent's
    cwd. ``ForkError`` when ``at_seq`` is not on the parent's surface or it is empty."""
    snapshot = await query.read_surface(session_id)
    surface = list(snapshot.events)
    if not surface:
        raise ForkError("nothing to fork: the session has no messages")
    if at_seq is None:
        end = len(surface)
    else:
        end = next((i + 1 for i, e in enumerate(surface) if e.seq == at_seq), 0)
        if not end:
            raise ForkError(
                f"seq {at_seq} is not a message of the current conversation"
                " (see `dsh show --json` for the seqs)"
            )
    taken = surface[:end]
    cleaned = " ".join(title.split()) if title is not None else None
    if title is not None and not cleaned:
        raise ForkError("a title cannot be empty")
    if cleaned is None:
        parent_title = await query.read_title(session_id)
        cleaned = fork_title(parent_title.title if parent_title else None, session_id)
    parent = await store.read_header(session_id)
    now = _log.now_ms()  # looked up now, as the stores do (a test's clock applies)
    header = SessionHeader(new_id or new_message_id(), now, parent.cwd)
    events: list[NewEvent] = [
        NewEvent(SESSION_FORK, {"parent": {"id": session_id, "seq": taken[-1].seq}}, time=now)
    ]
    events += [NewEvent(e.type, e.data, "append", time=e.time) for e in taken]
    if profile is not None:
        events.append(NewEvent(SESSION_PROFILE, dict(profile), time=now))
    kind = "user" if title is not None else "fallback"
    events.append(NewEvent(SESSION_TITLE, {"title": cleaned, "source": {"kind": kind}}, time=now))
    return await store.import_session(header, events)
