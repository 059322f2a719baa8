"""What ``dsh mcp`` answers, without the protocol: the sessions the user can see, the
messages that contain some words, and one session's bounded snapshot.

Every read goes through the runtime's store as the user dsh connects as (the OS user on
SQLite, the role on PostgreSQL), so a session that is neither theirs nor shared with them
is not found, exactly as on the command line. A failure is a ``CliError`` or one of the
errors ``dsh`` itself reports; ``error_line`` words each as the CLI does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.display import single_line
from core.errors import SessionNotFoundError
from core.log import SESSION_SOURCE, SessionHeader
from core.references import (
    SessionReferenceConfig,
    SessionReferenceError,
    SessionReferenceInput,
    SessionReferenceService,
    encode_session_reference_uri,
)
from tui.cli.common import CliError, reference_error_line, resolve
from tui.shared.activity import active_at, by_last_activity
from tui.shared.errors import describe_error
from tui.shared.filtering import same_dir, session_matches
from tui.shared.runtime import Runtime, read_latest_events
from tui.shared.searching import find_messages

__all__ = [
    "DEFAULT_LIST_LIMIT",
    "DEFAULT_SEARCH_LIMIT",
    "MAX_LIMIT",
    "SearchAnswer",
    "SessionListing",
    "SessionSnapshot",
    "check_limit",
    "error_line",
    "find_session",
    "list_sessions",
    "read_session",
    "search_sessions",
    "snapshot_budget",
]

DEFAULT_SEARCH_LIMIT = 20
"""As ``dsh search``'s ``--limit``."""
DEFAULT_LIST_LIMIT = 50
MAX_LIMIT = 1000
"""The most rows one call returns: an agent's context is the scarce thing, and a bigger
answer would only be cut by the client."""


def error_line(err: BaseException) -> str:
    """The one line ``dsh`` prints after ``dsh: error:`` for ``err`` (``tui.cli.commands``)."""
    if isinstance(err, CliError):
        return str(err)
    if isinstance(err, SessionReferenceError):
        return reference_error_line(err)
    return describe_error(err)


def check_limit(name: str, value: object) -> int:
    """A row count an agent gave: a whole number from 1 to ``MAX_LIMIT``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise CliError(f"{name} must be a whole number, not {_shown(value)}")
    if value < 1:
        raise CliError(f"{name} must be a positive number, not {value}")  # as --limit
    if value > MAX_LIMIT:
        raise CliError(f"{name} must be at most {MAX_LIMIT}, not {value}")
    return value


def _shown(value: object) -> str:
    return single_line(repr(value), 40)


# --------------------------------------------------------------------------- search


@dataclass(frozen=True, slots=True)
class SearchAnswer:
    rows: list[dict[str, Any]]
    note: str | None


async def search_sessions(rt: Runtime, query: str, limit: int) -> SearchAnswer:
    """``dsh search QUERY --limit N --json``: the same hits, the same rows."""
    if not isinstance(query, str):
        raise CliError(f"query must be a string, not {_shown(query)}")
    found = await find_messages(rt, query, check_limit("limit", limit))
    return SearchAnswer(found.json_rows(), found.note)


# --------------------------------------------------------------------------- list


@dataclass(frozen=True, slots=True)
class SessionListing:
    rows: list[dict[str, Any]]
    total: int
    """How many sessions matched before the limit cut them."""


async def _source_tools(rt: Runtime, ids: Sequence[str]) -> dict[str, str]:
    """The tool each imported session came from (its ``session/source`` event)."""
    if not ids:
        return {}
    events = await read_latest_events(rt.store, SESSION_SOURCE, ids)
    return {
        sid: tool
        for sid, event in events.items()
        if isinstance(tool := event.data.get("tool"), str)
    }


async def list_sessions(
    rt: Runtime, query: str | None = None, cwd: str | None = None, limit: int = DEFAULT_LIST_LIMIT
) -> SessionListing:
    """The sessions the user can see, most recently active first (as ``dsh sessions``),
    those whose id, title or cwd contain ``query`` (as the app's filter) and whose cwd is
    ``cwd``, at most ``limit`` of them."""
    if query is not None and not isinstance(query, str):
        raise CliError(f"query must be a string, not {_shown(query)}")
    if cwd is not None and not isinstance(cwd, str):
        raise CliError(f"cwd must be a string, not {_shown(cwd)}")
    limit = check_limit("limit", limit)
    needle = (query or "").strip()
    last_active = await rt.query.read_last_event_times()
    headers = by_last_activity(await rt.query.list_sessions(), last_active)
    titles = {sid: t.title for sid, t in (await rt.query.read_titles()).items()}
    wanted = [
        h
        for h in headers
        if (not needle or session_matches(needle, h.id, titles.get(h.id), h.cwd))
        and (cwd is None or (h.cwd is not None and same_dir(h.cwd, cwd)))
    ]
    shown = wanted[:limit]
    sources = await _source_tools(rt, [h.id for h in shown])
    return SessionListing(_rows(shown, titles, last_active, sources), len(wanted))


def _rows(
    headers: Sequence[SessionHeader],
    titles: Mapping[str, str],
    last_active: Mapping[str, int],
    sources: Mapping[str, str],
) -> list[dict[str, Any]]:
    return [
        {
            "id": h.id,
            "title": titles.get(h.id),
            "cwd": h.cwd,
            "created_at": h.created_at,
            "last_active_at": active_at(h, last_active.get(h.id)),
            "owner": h.owner,
            "source_tool": sources.get(h.id),
            "uri": encode_session_reference_uri(h.id),
        }
        for h in headers
    ]


# --------------------------------------------------------------------------- read


@dataclass(frozen=True, slots=True)
class SessionSnapshot:
    """What ``prepare`` would inject for one referenced session: ``text``, the prompt
    (untrusted-content warning, tag-safe JSON of the retained conversation), and
    ``source``, the snapshot message's metadata (its retention stats)."""

    session_id: str
    label: str
    text: str
    source: dict[str, Any]
    max_bytes: int


def snapshot_budget(rt: Runtime, max_bytes: int | None) -> int:
    """The retention budget of one read: ``max_bytes``, never above the configured
    ``max_reference_bytes`` (also the default)."""
    limit = rt.config.references.max_reference_bytes
    if max_bytes is None:
        return limit
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int):
        raise CliError(f"max_bytes must be a whole number, not {_shown(max_bytes)}")
    if max_bytes < 1:
        raise CliError(f"max_bytes must be a positive number, not {max_bytes}")
    return min(max_bytes, limit)


def _service(rt: Runtime, budget: int) -> SessionReferenceService:
    if budget == rt.config.references.max_reference_bytes:
        return rt.service
    limits = rt.config.references
    return SessionReferenceService(
        rt.query,
        SessionReferenceConfig(
            max_references=limits.max_references,
            candidate_limit=limits.candidate_limit,
            max_reference_bytes=budget,
        ),
    )


async def find_session(rt: Runtime, name: str) -> SessionHeader:
    """The session ``name`` names, as ``dsh show NAME`` finds it: its id (read directly),
    else a unique id prefix or its exact title; the CLI's error otherwise."""
    if not isinstance(name, str):
        raise CliError(f"session_id must be a string, not {_shown(name)}")
    try:
        return await rt.store.read_header(name)
    except SessionNotFoundError:
        return await resolve(rt, name)  # raises with the CLI's words when none


async def read_session(rt: Runtime, name: str, max_bytes: int | None = None) -> SessionSnapshot:
    """The bounded snapshot of session ``name``: exactly what ``prepare`` injects when a
    message mentions it (the label a mention from the ``@`` picker carries: its title,
    else its id), through the same ``SessionReferenceService.prepare``."""
    budget = snapshot_budget(rt, max_bytes)
    header = await find_session(rt, name)
    # (``read_titles``, not ``read_title``: that one reads the header again when untitled)
    title = (await rt.query.read_titles([header.id])).get(header.id)
    label = title.title if title is not None and title.title else header.id
    # ``prepare`` writes into a target session that is never the source; a reader has
    # none, so it is a header no session can equal (longer than the source's id).
    reader = SessionHeader(id=f"mcp:{header.id}", created_at=0)
    prepared = await _service(rt, budget).prepare(
        reader, [], [SessionReferenceInput(header.id, label)]
    )
    message = prepared.additional_context
    assert message is not None  # one reference: one snapshot
    (block,) = message["content"]
    return SessionSnapshot(header.id, label, block["text"], dict(message["source"]), budget)
