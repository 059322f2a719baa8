"""Storing sessions of other AI tools (``core.importers.foreign``) in a ``SessionStore``,
the same for every tool (issue 33).

A new session is stored whole, in one transaction: seq 0 is its ``session/source`` event
(where it came from), then the reader's events as they are, then a ``session/title`` event:
the tool's title (source kind ``provider``), else the first line of the first message a
person wrote, as dsh names its own sessions (kind ``fallback``); both marked as the
importer's (``"provider": TOOL, "imported": true``). Its id is the tool's own when that is free; when another
session already holds it, a fallback id derived from the tool and the original id (so
that importing it again finds it again), checked the same way.

Importing again is incremental. The stored session's events, without its
``session/source`` event and the ``session/title`` events of the importer or of the user,
are compared with what the reader gives now (``core.importers.detect.same_event``):

* the same events: ``unchanged``, nothing written (but a new title, see below);
* the stored ones are a strict prefix: the new events are appended in one batch, with
  their own times: ``updated``;
* the last message stored has grown since (same type and message id, its content blocks
  followed by more: a reply its tool writes over several lines, read in the middle),
  perhaps followed by log-only events that still match: the whole message is appended as
  a replace of what was read of it (SPEC §2.3: the surface shows it once, in its place),
  then the new events: ``updated``;
* anything else (the source was edited, or the session went on in dsh): ``conflict``,
  reported and never merged: nothing is written.

A title the tool changed (or gave since) is written again (one more ``session/title``
event) unless the user has renamed the session in dsh since; a fallback title never
replaces another title. Memory is bounded by one session: sessions come
from the reader one at a time and each is stored (or compared) before the next is read.

The readers are found through ``FORMAT_MODULES`` (tool → module), imported when first
asked for; every module there must exist (a missing one is a broken install, never
skipped quietly).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import io
import unicodedata
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path
from typing import Any, Literal, cast

from core.batches import EventBatches
from core.engine import fallback_title
from core.errors import (
    DshError,
    InvalidEventError,
    SessionExistsError,
    SessionNotFoundError,
    SessionReadOnlyError,
)
from core.importers.detect import same_event
from core.importers.foreign import (
    FOREIGN_TOOLS,
    SNIFF_BYTES,
    ForeignFormat,
    ForeignImportError,
    ForeignSession,
    ForeignTool,
    source_event,
)
from core.importers.reference import looks_like_reference
from core.importers.source import ZSTD_MAGIC, decompressed_chunks, open_regular_file
from core.jsoncodec import loads_exact, utf8_len
from core.leases import lease_owner, lease_owner_is_dead
from core.limits import MAX_SESSION_ID_BYTES, MAX_TITLE_BYTES
from core.log import (
    SESSION_SOURCE,
    SESSION_TITLE,
    USER_MESSAGE,
    Event,
    NewEvent,
    Replace,
    SessionHeader,
    message_text,
)
from core.logfile import LogImportError
from core.store import SessionStore

__all__ = [
    "FORMAT_MODULES",
    "TOOL_NAMES",
    "ForeignOutcome",
    "ForeignStatus",
    "NativeKind",
    "WantedTitle",
    "candidate_ids",
    "fallback_id",
    "file_kind",
    "import_foreign",
    "imported_title",
    "load_format",
    "native_kind",
    "plain_head",
    "read_head",
    "sniff_foreign",
    "store_foreign_session",
    "title_event",
    "wanted_title",
]

FORMAT_MODULES: dict[ForeignTool, str] = {
    "claude-code": "core.importers.claude_code",
    "codex": "core.importers.codex",
    "chatgpt": "core.importers.chatgpt",
}
"""Where each tool's reader (a ``ForeignFormat`` module) lives."""

TOOL_NAMES: Mapping[str, str] = {
    "claude-code": "Claude Code",
    "codex": "Codex",
    "chatgpt": "ChatGPT",
}
"""How each tool is named to a person."""

assert set(FORMAT_MODULES) == set(FOREIGN_TOOLS)


def load_format(tool: str) -> ForeignFormat:
    """The reader of ``tool`` (a key of ``FORMAT_MODULES``; ``KeyError`` otherwise). A
    module that cannot be imported raises: dsh is installed without one of its parts."""
    module = importlib.import_module(FORMAT_MODULES[cast(ForeignTool, tool)])
    return cast(ForeignFormat, module)


ForeignStatus = Literal["imported", "updated", "unchanged", "conflict", "failed"]


@dataclass(frozen=True, slots=True)
class ForeignOutcome:
    """What became of one session (or of a file or session that could not be read)."""

    status: ForeignStatus
    tool: str
    file: str
    original_id: str | None = None
    session_id: str | None = None
    new_events: int = 0
    title_changed: bool = False
    line: int = 0  # for ``failed``: the 1-based line (0: not about one line)
    reason: str = ""  # for ``failed``: what is wrong, without the file and line
    files: tuple[str, ...] = ()  # every file the session was read from


# -- ids ----------------------------------------------------------------------------------

_FALLBACK_NAMESPACE = uuid.UUID("5f0c1b9e-4a2d-5e3f-9b7c-33d5a1e0c0de")


def fallback_id(tool: str, original_id: str) -> str:
    """The id an imported session takes when its own is held by another session: a
    name-based UUID (version 5) of the tool and the original id, so the same every time."""
    name = f"{tool}\0{original_id}".encode("utf-8", "surrogatepass")
    digest = hashlib.sha1(_FALLBACK_NAMESPACE.bytes + name, usedforsecurity=False).digest()
    return str(uuid.UUID(bytes=digest[:16], version=5))


def _usable_id(original_id: str) -> bool:
    """Whether a tool's own id can be a dsh session id as it is: short, printable, no
    spaces, no lone surrogates (else the fallback id is used)."""
    if not original_id or utf8_len(original_id) > MAX_SESSION_ID_BYTES:
        return False
    try:
        original_id.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return all(
        not ch.isspace() and unicodedata.category(ch)[0] not in ("C", "Z") for ch in original_id
    )


def candidate_ids(tool: str, original_id: str) -> list[str]:
    """The ids an imported session may have, in the order they are tried."""
    fallback = fallback_id(tool, original_id)
    return [original_id, fallback] if _usable_id(original_id) else [fallback]


# -- titles -------------------------------------------------------------------------------


def imported_title(title: str | None) -> str | None:
    """A tool's title as dsh stores it: whitespace runs as one space, at most
    ``MAX_TITLE_BYTES`` (cut at a character); ``None`` when nothing is left."""
    if title is None:
        return None
    cleaned = " ".join(title.split())
    if utf8_len(cleaned) > MAX_TITLE_BYTES:
        raw = cleaned.encode("utf-8", "surrogatepass")[:MAX_TITLE_BYTES]
        cleaned = raw.decode("utf-8", "ignore").rstrip()
    return cleaned or None


TitleKind = Literal["provider", "fallback"]


@dataclass(frozen=True, slots=True)
class WantedTitle:
    """The title an imported session should have: the tool's own (``provider``), else
    its first request's first line as dsh names its own sessions (``fallback``)."""

    text: str
    kind: TitleKind


def wanted_title(title: str | None, events: Sequence[NewEvent]) -> WantedTitle | None:
    """The tool's title (``imported_title``), else the first line of the first message a
    person wrote (``core.engine.fallback_title``), else ``None``."""
    own = imported_title(title)
    if own is not None:
        return WantedTitle(own, "provider")
    for event in events:
        source = event.data.get("source") if event.type == USER_MESSAGE else None
        if isinstance(source, Mapping) and source.get("kind") == "user":
            text = fallback_title(message_text(event.data))
            return None if text is None else WantedTitle(text, "fallback")
    return None


def title_event(tool: str, title: WantedTitle, time: int) -> NewEvent:
    """The ``session/title`` event the importer writes: source kind ``provider`` (the
    tool's title) or ``fallback``, marked as the importer's (``provider``: the tool,
    ``imported``) so that a later import tells it from the user's."""
    source = {"kind": title.kind, "provider": tool, "imported": True}
    return NewEvent(SESSION_TITLE, {"title": title.text, "source": source}, time=time)


def _importer_title(event: Event, tool: str) -> WantedTitle | None:
    """The title of an importer's ``session/title`` event (``None`` for anything else)."""
    if event.type != SESSION_TITLE:
        return None
    source = event.data.get("source")
    if not (
        isinstance(source, Mapping)
        and source.get("kind") in ("provider", "fallback")
        and source.get("provider") == tool
        and source.get("imported") is True
        and isinstance(text := event.data.get("title"), str)
    ):
        return None
    return WantedTitle(text, source["kind"])


def _is_user_title(event: Event) -> bool:
    source = event.data.get("source") if event.type == SESSION_TITLE else None
    return isinstance(source, Mapping) and source.get("kind") == "user"


# -- storing ------------------------------------------------------------------------------

_BATCH = 1000


def _timed(events: Sequence[NewEvent], start: int) -> list[NewEvent]:
    """The events with every missing ``time`` set to the previous event's (``start`` at
    first), so that what is stored is what a later import compares with."""
    out: list[NewEvent] = []
    last = start
    for event in events:
        if event.time is None:
            event = NewEvent(
                event.type, event.data, event.surface_op, event.source_event_seqs, last
            )
        else:
            last = event.time
        out.append(event)
    return out


def _batches(events: Sequence[NewEvent]) -> EventBatches:
    it = iter(events)
    return EventBatches(iter(lambda: list(islice(it, _BATCH)), []))


def _failed(session: ForeignSession, session_id: str | None, reason: str) -> ForeignOutcome:
    return ForeignOutcome(
        "failed",
        session.provenance.tool,
        session.provenance.file,
        session.provenance.original_id,
        session_id,
        reason=reason,
        files=session.files,
    )


async def store_foreign_session(store: SessionStore, session: ForeignSession) -> ForeignOutcome:
    """Store one session read from another tool, or bring its stored copy up to date
    (module docstring). Every write is one transaction: nothing of a session is half
    stored. A store rule the session breaks is a ``failed`` outcome."""
    prov = session.provenance
    events = _timed(session.events, session.created_at)
    title = wanted_title(session.title, events)
    for session_id in candidate_ids(prov.tool, prov.original_id):
        try:
            outcome = await _store_as(store, session, session_id, events, title)
        except InvalidEventError as err:
            return _failed(session, session_id, str(err))
        if outcome is not None:
            return outcome
    return _failed(
        session,
        None,
        "its id and its fallback id are both held by other sessions; not imported",
    )


async def _store_as(
    store: SessionStore,
    session: ForeignSession,
    session_id: str,
    events: list[NewEvent],
    title: WantedTitle | None,
) -> ForeignOutcome | None:
    """Import ``session`` as ``session_id``, or update it there; ``None`` when the id is
    held by a session that is not this one (or that the user may not write)."""
    prov = session.provenance
    for _ in range(2):  # a second look when another writer created it meanwhile
        try:
            header = await store.read_header(session_id)
        except SessionNotFoundError:
            last = events[-1].time if events else session.created_at
            assert last is not None
            log = [source_event(prov, session.created_at), *events]
            if title is not None:
                log.append(title_event(prov.tool, title, last))
            try:
                await store.import_session(
                    SessionHeader(session_id, session.created_at, session.cwd), _batches(log)
                )
            except SessionExistsError:
                continue
            return ForeignOutcome(
                "imported",
                prov.tool,
                prov.file,
                prov.original_id,
                session_id,
                new_events=len(events),
                files=session.files,
            )
        if header.owner is not None and header.owner != store.current_user():
            return None  # another user's (shared with this one): not ours to update
        if not await _is_this_source(store, session_id, session):
            return None
        try:
            return await _update_alone(store, session, session_id, events, title)
        except SessionReadOnlyError:
            return None
    return None  # created meanwhile by a session this user cannot see


UPDATE_LEASE_MS = 10 * 60 * 1000
"""How long an update holds its session's reply lease at most (a process killed while
holding it is seen dead at once on its own host; elsewhere the lease runs out)."""


async def _update_alone(
    store: SessionStore,
    session: ForeignSession,
    session_id: str,
    events: list[NewEvent],
    title: WantedTitle | None,
) -> ForeignOutcome:
    """``_update`` holding the session's reply lease: two imports at once (or a reply in
    dsh) never both append what they found missing."""
    owner = lease_owner()
    if not await store.take_reply_lease(
        session_id, owner, ttl_ms=UPDATE_LEASE_MS, dead=lease_owner_is_dead
    ):
        return _failed(
            session,
            session_id,
            "another dsh is writing to this session (a reply or another import); "
            "import it again later",
        )
    try:
        return await _update(store, session, session_id, events, title)
    finally:
        with contextlib.suppress(DshError):  # a lease not given back runs out on its own
            await asyncio.shield(store.release_reply_lease(session_id, owner))


async def _is_this_source(store: SessionStore, session_id: str, session: ForeignSession) -> bool:
    try:
        (first,) = await store.read_events_at(session_id, [0])
    except (InvalidEventError, SessionNotFoundError):
        return False  # no events at all, or deleted meanwhile
    data = first.data
    return (
        first.type == SESSION_SOURCE
        and data.get("tool") == session.provenance.tool
        and data.get("id") == session.provenance.original_id
    )


async def _update(
    store: SessionStore,
    session: ForeignSession,
    session_id: str,
    events: list[NewEvent],
    title: WantedTitle | None,
) -> ForeignOutcome:
    """Compare the stored session with ``events`` (reading it ``_BATCH`` events at a time,
    so that memory holds one session, the reader's, plus a batch) and append what is new."""
    prov = session.provenance
    base = ForeignOutcome(
        "unchanged", prov.tool, prov.file, prov.original_id, session_id, files=session.files
    )
    _, last_seq, _ = await store.read_surface_tail(session_id, 0)
    matched = 0  # how many of ``events`` the stored session holds, in order
    grown: Event | None = None  # the stored copy of ``events[grown_at]``, which grew since
    grown_at = 0
    last_time = session.created_at
    ours: WantedTitle | None = None  # the importer's latest title
    renamed = False  # the user's title came after it
    end = 0 if last_seq is None else last_seq + 1
    for start in range(1, end, _BATCH):
        for event in await store.read_events_at(session_id, range(start, min(start + _BATCH, end))):
            last_time = event.time
            if (found := _importer_title(event, prov.tool)) is not None:
                ours, renamed = found, False
            elif _is_user_title(event):
                renamed = True
            elif matched < len(events) and same_event(event, events[matched]):
                if grown is not None and event.surface_op is not None:
                    return _with(base, status="conflict")  # after it, log-only events only
                matched += 1
            elif grown is not None:  # only the message that grew (replaced) may follow
                if event.surface_op != Replace(grown.seq, grown.seq):
                    return _with(base, status="conflict")
                if _same_message_event(event, events[grown_at]):
                    grown = None
                elif _grew(event, events[grown_at]):
                    grown = event
                else:
                    return _with(base, status="conflict")
            elif matched < len(events) and _grew(event, events[matched]):
                grown, grown_at, matched = event, matched, matched + 1
            else:
                return _with(base, status="conflict")
    new: list[NewEvent] = []
    if grown is not None:  # the whole message in place of what was read of it
        whole = events[grown_at]
        replace_op = Replace(grown.seq, grown.seq)
        new.append(NewEvent(whole.type, whole.data, replace_op, (grown.seq,), whole.time))
    growth = events[matched:]
    new.extend(growth)
    growth_count = len(new)
    title_changed = (
        title is not None
        and not renamed
        and title != ours
        and (title.kind == "provider" or ours is None)  # a fallback never replaces a title
    )
    if title_changed:
        assert title is not None
        time = new[-1].time if new else last_time
        assert time is not None
        new.append(title_event(prov.tool, title, time))
    if not new:
        return base
    await store.append_batch(session_id, new)
    return _with(base, status="updated", new_events=growth_count, title_changed=title_changed)


def _message(event: Event | NewEvent) -> Mapping[str, Any]:
    data = event.data
    message = data.get("message") if event.type != USER_MESSAGE else data
    return message if isinstance(message, Mapping) else {}


def _grew(stored: Event, new: NewEvent) -> bool:
    """Whether ``new`` is ``stored``'s message read again after its tool wrote more of it
    (a reply written over several lines, read in the middle): a surface event of the same
    type and message id whose content blocks begin with all of the stored ones. Only the
    last message imported may have grown (log-only events may follow it)."""
    if stored.surface_op is None or new.surface_op != "append" or stored.type != new.type:
        return False
    old, whole = _message(stored), _message(new)
    old_blocks, new_blocks = old.get("content"), whole.get("content")
    return (
        old.get("id") is not None
        and old.get("id") == whole.get("id")
        and isinstance(old_blocks, Sequence)
        and isinstance(new_blocks, Sequence)
        and len(old_blocks) <= len(new_blocks)
        and all(a == b for a, b in zip(old_blocks, new_blocks, strict=False))
    )


def _same_message_event(stored: Event, new: NewEvent) -> bool:
    """Whether the stored replacement of a message that grew is ``new`` (its op aside)."""
    return (stored.type, stored.time) == (new.type, new.time) and stored.data == new.data


def _with(outcome: ForeignOutcome, **changes: Any) -> ForeignOutcome:
    return replace(outcome, **changes)


# -- reading and storing one after the other ----------------------------------------------


def _error_outcome(tool: str, err: LogImportError, paths: Sequence[Path]) -> ForeignOutcome:
    """A reader's error as an outcome; one without its file (a ``LogImportError`` of the
    shared line reader) names the only file read, when there is one."""
    file = getattr(err, "file", "") or (str(paths[0]) if len(paths) == 1 else "")
    message = str(err)
    prefix = f"line {err.line}: "
    if err.line and message.startswith(prefix):
        message = message[len(prefix) :]
    return ForeignOutcome(
        "failed",
        tool,
        file,
        getattr(err, "original_id", None),
        line=err.line,
        reason=message,
        files=(file,) if file else (),
    )


async def import_foreign(
    store: SessionStore,
    fmt: ForeignFormat,
    paths: Sequence[Path],
) -> AsyncIterator[ForeignOutcome]:
    """Read the sessions of ``paths`` with ``fmt`` one at a time (off the event loop) and
    store each before the next is read; yields one outcome per session or failure."""
    sessions = fmt.read_sessions(paths)
    while True:
        try:
            item = await asyncio.to_thread(_next, sessions)
        except LogImportError as err:  # a reader that raised instead of yielding
            yield _error_outcome(fmt.TOOL, err, paths)
            return
        except OSError as err:
            where = getattr(err, "filename", None) or ""
            yield ForeignOutcome(
                "failed", fmt.TOOL, str(where), reason=f"cannot read it: {err.strerror or err}"
            )
            return
        if item is None:
            return
        if isinstance(item, LogImportError):
            yield _error_outcome(fmt.TOOL, item, paths)
            continue
        yield await store_foreign_session(store, item)
        del item  # the next session is read with this one released


def _next(
    sessions: Iterator[ForeignSession | ForeignImportError],
) -> ForeignSession | ForeignImportError | None:
    return next(sessions, None)


# -- which format a file is ---------------------------------------------------------------

NativeKind = Literal["dsh", "reference"]


def native_kind(head: bytes) -> NativeKind | None:
    """Whether a file whose (decompressed) start is ``head`` is one of dsh's own kinds of
    log: a dsh export (first line ``{"type": "session", "created_at"…}``) or a reference
    log (``createdAt``); ``None`` for anything else, or when the first line does not end
    within ``head``."""
    rest = head
    while rest:
        line, newline, rest = rest.partition(b"\n")
        if not line.strip():
            continue
        if not newline and len(head) >= SNIFF_BYTES:
            return None  # the first line goes on past what was read
        try:
            first = loads_exact(line.decode("utf-8"), frozen=False)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return None
        if not isinstance(first, dict) or first.get("type") != "session":
            return None
        return "reference" if looks_like_reference(first) else "dsh"
    return None


def read_head(path: Path) -> bytes:
    """The first ``SNIFF_BYTES`` of a regular file (``NotRegularFileError`` for a FIFO,
    a device…; ``OSError`` when it cannot be read)."""
    with open_regular_file(path) as file:
        return file.read(SNIFF_BYTES)


def plain_head(head: bytes) -> bytes:
    """``head`` itself, or, for a file of Zstandard frames, the first ``SNIFF_BYTES`` they
    decompress to (decompressed a little at a time, as every log is: a bomb costs
    nothing; what came before a damaged or cut frame)."""
    if not head.startswith(ZSTD_MAGIC):
        return head
    out = bytearray()
    try:
        for chunk in decompressed_chunks(io.BytesIO(head)):
            out += chunk
            if len(out) >= SNIFF_BYTES:
                break
    except LogImportError:
        pass  # the head ends inside a frame, or the file is damaged: what came before
    return bytes(out[:SNIFF_BYTES])


def file_kind(path: Path, head: bytes, tools: Sequence[str]) -> str | None:
    """What the file starting with ``head`` is: ``dsh`` or ``reference`` (dsh's own
    logs), one of ``tools`` whose reader recognises it, or ``None``. A Zstandard file is
    judged by what it decompresses to (a compressed reference log or Codex rollout)."""
    plain = plain_head(head)
    if head.startswith(ZSTD_MAGIC):
        if native_kind(plain) == "reference":
            return "reference"  # dsh's own exports are never compressed
    else:
        kind = native_kind(head)
        if kind is not None:
            return kind
    return sniff_foreign(path, head, tools) or (
        sniff_foreign(path, plain, tools) if plain != head else None
    )


def sniff_foreign(path: Path, head: bytes, tools: Sequence[str]) -> str | None:
    """The first of ``tools`` whose reader recognises the file, else ``None``."""
    for tool in tools:
        if load_format(tool).sniff(path, head):
            return tool
    return None
