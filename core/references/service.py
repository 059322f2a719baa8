"""``SessionReferenceService`` (SPEC §4.4, §4.5): candidates for the ``@`` picker and
``prepare``, which turns references into one bounded, detached snapshot message."""

from __future__ import annotations

import asyncio
import copy
from array import array
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from core.errors import SearchQueryError
from core.gcpause import gc_paused
from core.log import Event, SessionHeader, text_block, user_message
from core.query import (
    MessageTailSnapshot,
    SessionQueryLike,
    SessionTitle,
    SurfaceOutlineSnapshot,
    SurfaceSnapshot,
)
from core.references.cancellation import CancelRequested, TaskFailed, gather_cancellable
from core.references.config import (
    SESSION_REFERENCE_CANCELLED,
    SESSION_REFERENCE_INVALID_CONFIG,
    SESSION_REFERENCE_INVALID_REFERENCE,
    SESSION_REFERENCE_READ_FAILED,
    SESSION_REFERENCE_SELF_REFERENCE,
    SESSION_REFERENCE_TOO_MANY,
    SessionReferenceConfig,
    SessionReferenceError,
)
from core.references.mentions import SessionReferenceInput, format_session_reference_mention
from core.references.projection import message_code, project_bodies, project_surface
from core.references.prompt import (
    reference_entry,
    render_reference_prompt_encoded,
    session_reference_source,
)
from core.references.retention import (
    EncodedMessage,
    RetainedEncoded,
    encode_message,
    retain_encoded,
    retention_cut,
)
from core.search import SearchHit, search_terms

__all__ = [
    "PreparedReferencedMessage",
    "SessionDiscovery",
    "SessionReferenceCandidate",
    "SessionReferenceService",
]


@dataclass(frozen=True, slots=True)
class SessionReferenceCandidate:
    """One row of the ``@`` picker; ``mention`` is what to insert into the composer."""

    session_id: str
    label: str
    cwd: str | None
    created_at: int
    mention: str


@dataclass(frozen=True, slots=True)
class SessionDiscovery:
    """One row of a host's session search (the picker, the sidebar filter, ``dsh
    candidates``, ACP ``/sessions``): a candidate, and for a body match the message that
    matched (``hit``: its seq, snippet and spans; ``None`` for a ``list_candidates``
    match, by id, cwd or title)."""

    candidate: SessionReferenceCandidate
    hit: SearchHit | None = None


@dataclass(frozen=True, slots=True)
class PreparedReferencedMessage:
    """What to send: the (copied) content and the snapshot message, or ``None`` without refs."""

    content: Any
    additional_context: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class _Projected:
    """What ``prepare`` keeps of one source's snapshot: its projection, not its events, the
    texts in UTF-8 (``EncodedMessage``: what is kept costs about its bytes)."""

    cwd: str | None
    captured_through_seq: int | None
    messages: list[EncodedMessage]
    # Messages left unread because retention drops them whatever their text (see
    # ``retention_cut``): how many, and their UTF-8 bytes.
    skipped_messages: int = 0
    skipped_bytes: int = 0


_BODIES_PER_READ = 32
"""At most this many bodies ``prepare`` reads at a time from a message tail (one
``read_bodies_at``, or ``read_events_at`` for a query without it)."""
_TEXT_BYTES_PER_READ = 8192
"""... and bodies whose texts hold at most these UTF-8 bytes (at least one body)."""


def _batches(codes: Sequence[int]) -> list[range]:
    """The kept message nodes (their projection codes, in order) in batches of bodies to
    read together: a checkpoint alone (its event carries the seqs it replaced, so read by
    ``read_events_at`` it can be far larger than its text), the others by ``_BODIES_PER_READ`` and
    ``_TEXT_BYTES_PER_READ``. A batch's events are all held while it is read and
    projected: this bounds them."""
    out: list[range] = []
    start = size = 0
    for i, code in enumerate(codes):
        checkpoint = bool(code & 2)
        if i > start and (
            checkpoint or i - start >= _BODIES_PER_READ or size + (code >> 2) > _TEXT_BYTES_PER_READ
        ):
            out.append(range(start, i))
            start = i
            size = 0
        size += code >> 2
        if checkpoint:
            out.append(range(start, i + 1))
            start = i + 1
            size = 0
    if start < len(codes):
        out.append(range(start, len(codes)))
    return out


def _code(message: EncodedMessage) -> int:
    """``projection_code`` of the message ``message`` was projected from."""
    return message_code(message.role, message.checkpoint, len(message.data))


def _cancelled() -> SessionReferenceError:
    return SessionReferenceError("session reference was cancelled", SESSION_REFERENCE_CANCELLED)


def _reason(cause: BaseException | None) -> str:
    """A failed read's cause in words (its message, else its type), never a repr."""
    if cause is None:
        return "unknown error"
    return str(cause) or type(cause).__name__


def _invalid(message: str) -> SessionReferenceError:
    return SessionReferenceError(message, SESSION_REFERENCE_INVALID_REFERENCE)


_HITS_PER_SESSION = 4
"""Message hits read per session wanted by ``discover`` and ``search_sessions``."""


def _body_matches(
    hits: Sequence[SearchHit],
    sessions: Sequence[SessionHeader],
    titles: dict[str, SessionTitle],
    excluded: set[str],
    limit: int,
) -> list[SessionDiscovery]:
    """One discovery per session of ``hits`` (its first, best hit), in hit order, for the
    listed sessions not in ``excluded``, at most ``limit``."""
    headers = {h.id: h for h in sessions}
    seen = set(excluded)
    out: list[SessionDiscovery] = []
    for hit in hits:
        header = headers.get(hit.session_id)
        if header is None or hit.session_id in seen:
            continue
        seen.add(hit.session_id)
        entry = titles.get(header.id)
        label = entry.title if entry is not None and entry.title else header.id
        mention = format_session_reference_mention(SessionReferenceInput(header.id, label))
        candidate = SessionReferenceCandidate(
            header.id, label, header.cwd, header.created_at, mention
        )
        out.append(SessionDiscovery(candidate, hit))
        if len(out) >= limit:
            break
    return out


def _check_cancel(cancel: asyncio.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise _cancelled()


class SessionReferenceService:
    """Reads other sessions only through ``query``'s async methods; holds no state."""

    def __init__(
        self, query: SessionQueryLike, config: SessionReferenceConfig | None = None
    ) -> None:
        if config is not None and not isinstance(config, SessionReferenceConfig):
            raise SessionReferenceError(
                f"config must be a SessionReferenceConfig, got {type(config).__name__}",
                SESSION_REFERENCE_INVALID_CONFIG,
            )
        self._query = query
        self._config = config if config is not None else SessionReferenceConfig()

    @property
    def config(self) -> SessionReferenceConfig:
        return self._config

    async def _read(
        self,
        what: str,
        factories: Sequence[Callable[[], Awaitable[Any]]],
        names: Sequence[str],
        cancel: asyncio.Event | None,
        ids: Sequence[str] | None = None,
    ) -> list[Any]:
        try:
            return await gather_cancellable(factories, cancel)
        except CancelRequested:
            raise _cancelled() from None
        except TaskFailed as failed:
            cause = failed.__cause__
            raise SessionReferenceError(
                f"could not read {what} {names[failed.index]}: {_reason(cause)}",
                SESSION_REFERENCE_READ_FAILED,
                session_id=None if ids is None else ids[failed.index],
            ) from cause

    # ----------------------------------------------------------------------- candidates

    async def list_candidates(
        self,
        target: SessionHeader,
        query: str = "",
        limit: int | None = None,
        *,
        cancel: asyncio.Event | None = None,
    ) -> list[SessionReferenceCandidate]:
        """Sessions the user may reference from ``target``, best first (SPEC §4.4)."""
        limit = self._check_discovery(query, limit)
        sessions: list[SessionHeader]
        titles: dict[str, SessionTitle]
        sessions, titles = await self._read(
            "the session list",
            [self._query.list_sessions, self._query.read_titles],
            ["(list_sessions)", "(read_titles)"],
            cancel,
        )
        return self._candidates(target, sessions, titles, query, limit)

    async def discover(
        self,
        target: SessionHeader,
        query: str = "",
        limit: int | None = None,
        *,
        cancel: asyncio.Event | None = None,
    ) -> list[SessionDiscovery]:
        """THE merge of the hosts' session search (the ``@`` picker, ``dsh candidates``,
        ACP ``/sessions``): ``list_candidates(target, query, limit)`` first, in its order
        (SPEC §4.4, unchanged), then the body matches (see ``search_sessions``) of the
        sessions not listed yet, best first, at most ``limit`` of them."""
        limit = self._check_discovery(query, limit)
        reads: list[Callable[[], Awaitable[Any]]] = [
            self._query.list_sessions,
            self._query.read_titles,
        ]
        names = ["(list_sessions)", "(read_titles)"]
        search = self._search(query, limit)
        if search is not None:
            reads.append(search)
            names.append("(search_messages)")
        sessions, titles, *found = await self._read("the session list", reads, names, cancel)
        candidates = self._candidates(target, sessions, titles, query, limit)
        listed = {c.session_id for c in candidates} | {target.id}
        body = _body_matches(found[0] if found else [], sessions, titles, listed, limit)
        return [SessionDiscovery(c) for c in candidates] + body

    async def search_sessions(
        self,
        query: str,
        *,
        exclude: Iterable[str] = (),
        limit: int | None = None,
        cancel: asyncio.Event | None = None,
    ) -> list[SessionDiscovery]:
        """The sessions whose user and assistant messages contain every term of ``query``
        (``core.search``), best match first, each once with its best message, none of
        ``exclude``, at most ``limit`` (default ``candidate_limit``). Sessions the query
        does not list (deleted, not readable) are never returned, whatever the index
        holds; a blank query, or a query without ``search_messages``, finds none. (The
        session list filter of a host puts these after its own matches.)"""
        limit = self._check_discovery(query, limit)
        search = self._search(query, limit)
        if search is None:
            return []
        sessions, titles, found = await self._read(
            "the session list",
            [self._query.list_sessions, self._query.read_titles, search],
            ["(list_sessions)", "(read_titles)", "(search_messages)"],
            cancel,
        )
        return _body_matches(found, sessions, titles, set(exclude), limit)

    def _check_discovery(self, query: object, limit: object) -> int:
        if limit is None:
            limit = self._config.candidate_limit
        if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
            raise _invalid(f"limit must be a positive int, got {limit!r}")
        if not isinstance(query, str):
            raise _invalid(f"query must be a str, got {type(query).__name__}")
        return limit

    def _search(self, query: str, limit: int) -> Callable[[], Awaitable[Any]] | None:
        search = getattr(self._query, "search_messages", None)
        if search is None or not query.strip():
            return None
        try:
            search_terms(query)
        except SearchQueryError:
            return None  # a paste, not words: the list's own matches are all there is
        # More hits than sessions wanted: a session's several matches count once.
        return lambda: search(query, limit=limit * _HITS_PER_SESSION)

    def _candidates(
        self,
        target: SessionHeader,
        sessions: Iterable[SessionHeader],
        titles: dict[str, SessionTitle],
        query: str,
        limit: int,
    ) -> list[SessionReferenceCandidate]:
        needle = query.casefold()
        target_id, target_cwd = target.id, target.cwd
        # The three groups, filled in list order (so each keeps it): the stable sort by
        # group without sorting, and a full first group ends the scan.
        same: list[tuple[SessionHeader, str | None]] = []
        no_cwd: list[tuple[SessionHeader, str | None]] = []
        other: list[tuple[SessionHeader, str | None]] = []
        for header in sessions:
            session_id, cwd = header.id, header.cwd
            if session_id == target_id:
                continue
            entry = titles.get(session_id)
            title = entry.title if entry is not None else None
            if needle and not (
                needle in session_id.casefold()
                or (cwd is not None and needle in cwd.casefold())
                or (title is not None and needle in title.casefold())
            ):
                continue
            if cwd is None:
                no_cwd.append((header, title))
            elif cwd == target_cwd:
                same.append((header, title))
                if len(same) >= limit:
                    break
            else:
                other.append((header, title))
        rows = same + no_cwd + other
        out: list[SessionReferenceCandidate] = []
        for header, title in rows[:limit]:
            label = title if title else header.id
            mention = format_session_reference_mention(SessionReferenceInput(header.id, label))
            out.append(
                SessionReferenceCandidate(header.id, label, header.cwd, header.created_at, mention)
            )
        return out

    # ----------------------------------------------------------------------- prepare

    def _dedupe(self, target: SessionHeader, references: object) -> list[SessionReferenceInput]:
        if isinstance(references, (str, bytes)) or not isinstance(references, Iterable):
            raise _invalid("references must be a sequence of SessionReferenceInput")
        items = list(references)
        for position, ref in enumerate(items):
            if not (
                isinstance(ref, SessionReferenceInput)
                and isinstance(ref.session_id, str)
                and (ref.label is None or isinstance(ref.label, str))
            ):
                raise _invalid(
                    f"reference #{position} is not a valid SessionReferenceInput: {ref!r}"
                )
            if ref.session_id == target.id:
                raise SessionReferenceError(
                    f"a session cannot reference itself ({ref.session_id!r})",
                    SESSION_REFERENCE_SELF_REFERENCE,
                )
        unique: dict[str, SessionReferenceInput] = {}
        for ref in items:
            if ref.session_id not in unique:
                label = ref.session_id if ref.label is None else ref.label
                unique[ref.session_id] = SessionReferenceInput(ref.session_id, label)
        if len(unique) > self._config.max_references:
            raise SessionReferenceError(
                f"{len(unique)} sessions referenced; at most {self._config.max_references} allowed",
                SESSION_REFERENCE_TOO_MANY,
            )
        return list(unique.values())

    async def prepare(
        self,
        target: SessionHeader,
        content: Any,
        references: Sequence[SessionReferenceInput],
        *,
        cancel: asyncio.Event | None = None,
    ) -> PreparedReferencedMessage:
        """Validate, read, project and bound the references; all or nothing (SPEC §4.5)."""
        content_copy = copy.deepcopy(content)
        refs = self._dedupe(target, references)
        if not refs:  # nothing to read, so nothing to cancel (SPEC §4.5 step 3)
            return PreparedReferencedMessage(content_copy, None)
        _check_cancel(cancel)

        # Everything read, projected and retained is acyclic and dropped when the helper
        # returns: the cyclic collector's passes over it would be pure overhead.
        with gc_paused():
            sources, entries = await self._read_and_retain(refs, cancel)
        # The prompt is made from the kept texts' UTF-8 at once, the sources emptied as it
        # goes: only it and those bytes are ever held together (peak memory).
        message = user_message(
            [text_block(render_reference_prompt_encoded(sources))],
            source=session_reference_source(entries),
        )
        return PreparedReferencedMessage(content_copy, message)

    async def _read_tail(
        self,
        ref: SessionReferenceInput,
        tail_of: Callable[[str, int], Awaitable[object]],
        read_at: Callable[[str, Sequence[int]], Awaitable[Sequence[Event]]],
    ) -> _Projected | object | None:
        """Like ``_read_kept``, from the surface's ``MessageTail`` (its newest messages until
        the budget is spent, its older checkpoints and two sums for the rest) instead of
        its whole outline: what is read is bounded by what retention can keep. ``None``
        when the tail is not enough or disagrees with the bodies (then the caller reads
        more)."""
        budget = self._config.max_reference_bytes
        snapshot = await tail_of(ref.session_id, budget)
        if not isinstance(snapshot, MessageTailSnapshot):
            return snapshot  # reported by the caller, in reference order
        assert ref.label is not None
        tail = snapshot.tail
        nodes = tail.nodes
        shape = [
            ("assistant" if code & 1 else "user", bool(code & 2), code >> 2) for _, code in nodes
        ]
        first = tail.older_checkpoints
        if tail.older_messages and not (
            sum(size for _, checkpoint, size in shape[first:-1] if not checkpoint) > budget
        ):
            return None  # not a tail retention surely cuts inside
        cut = retention_cut(
            session_id=ref.session_id,
            label=ref.label,
            cwd=snapshot.session.cwd,
            captured_through_seq=snapshot.captured_through_seq,
            outline=shape,
            max_bytes=budget,
        )
        if tail.older_messages and cut < first:
            return None
        kept = [i for i in range(cut) if shape[i][1]] + list(range(cut, len(nodes)))
        skipped = [shape[i][2] for i in range(cut) if not shape[i][1]]
        cwd, through = snapshot.session.cwd, snapshot.captured_through_seq
        skipped_messages = len(skipped) + tail.older_messages
        skipped_bytes = sum(skipped) + tail.older_bytes
        # The kept nodes' seqs and projection codes in two arrays; the tail, its outline
        # and the lists above are released before any body is read (peak memory).
        seqs = array("q", [nodes[i][0] for i in kept])
        codes = array("q", [nodes[i][1] for i in kept])
        del snapshot, tail, nodes, shape, kept, skipped
        # A few bodies at a time, each batch projected at once: only their texts are
        # held, never all the kept events together (peak memory follows what is kept).
        messages: list[EncodedMessage] = []
        bodies_at = getattr(self._query, "read_bodies_at", None)
        for batch in _batches(codes):
            wanted = seqs[batch.start : batch.stop].tolist()
            if bodies_at is not None:  # never a checkpoint's source seqs (peak memory)
                projected = project_bodies(await bodies_at(ref.session_id, wanted))
            else:
                projected = project_surface(await read_at(ref.session_id, wanted))
            messages += map(encode_message, projected)
            del projected
        if len(messages) != len(codes) or any(
            _code(m) != code for m, code in zip(messages, codes, strict=True)
        ):
            return None
        return _Projected(cwd, through, messages, skipped_messages, skipped_bytes)

    async def _read_kept(
        self,
        ref: SessionReferenceInput,
        outline: Callable[[str], Awaitable[object]],
        read_at: Callable[[str, Sequence[int]], Awaitable[Sequence[Event]]],
    ) -> _Projected | object | None:
        """Read only what retention can keep: the surface's outline (no event data), then
        the bodies of the checkpoints and of the newest messages from ``retention_cut`` on.
        ``None`` when the outline disagrees with the bodies (then the whole surface is read)."""
        snapshot = await outline(ref.session_id)
        if not isinstance(snapshot, SurfaceOutlineSnapshot):
            return snapshot  # reported by the caller, in reference order
        assert ref.label is not None
        nodes = [node for node in snapshot.nodes if node.projection >= 0]
        shape = [
            ("assistant" if code & 1 else "user", bool(code & 2), code >> 2)
            for code in (node.projection for node in nodes)
        ]
        cut = retention_cut(
            session_id=ref.session_id,
            label=ref.label,
            cwd=snapshot.session.cwd,
            captured_through_seq=snapshot.captured_through_seq,
            outline=shape,
            max_bytes=self._config.max_reference_bytes,
        )
        kept = [i for i in range(cut) if shape[i][1]] + list(range(cut, len(nodes)))
        events = await read_at(ref.session_id, [nodes[i].seq for i in kept]) if kept else []
        messages = [encode_message(m) for m in project_surface(events)]
        del events
        if [(m.role, m.checkpoint, len(m.data)) for m in messages] != [shape[i] for i in kept]:
            return None
        skipped = [shape[i][2] for i in range(cut) if not shape[i][1]]
        return _Projected(
            snapshot.session.cwd,
            snapshot.captured_through_seq,
            messages,
            len(skipped),
            sum(skipped),
        )

    async def _read_and_retain(
        self, refs: list[SessionReferenceInput], cancel: asyncio.Event | None
    ) -> tuple[list[RetainedEncoded], list[dict[str, Any]]]:
        """Read every source concurrently, project each as it arrives, then bound each one:
        the source objects and the prompt entries, in reference order."""

        outline = getattr(self._query, "read_surface_outline", None)
        read_at = getattr(self._query, "read_events_at", None)
        tail_of = getattr(self._query, "read_message_tail", None)

        def reader(ref: SessionReferenceInput) -> Callable[[], Awaitable[_Projected | object]]:
            session_id = ref.session_id

            async def read() -> _Projected | object:
                if tail_of is not None and read_at is not None:
                    bounded = await self._read_tail(ref, tail_of, read_at)
                    if bounded is not None:
                        return bounded
                if outline is not None and read_at is not None:
                    bounded = await self._read_kept(ref, outline, read_at)
                    if bounded is not None:
                        return bounded
                snapshot: object = await self._query.read_surface(session_id)
                if not isinstance(snapshot, SurfaceSnapshot):
                    return snapshot  # reported below, in reference order
                # Project as soon as this source arrives: its events (the bulk of the
                # memory) are released here instead of all sources being held at once.
                return _Projected(
                    snapshot.session.cwd,
                    snapshot.captured_through_seq,
                    [encode_message(m) for m in project_surface(snapshot.events)],
                )

            return read

        projected = await self._read(
            "session",
            [reader(ref) for ref in refs],
            [repr(ref.session_id) for ref in refs],
            cancel,
            [ref.session_id for ref in refs],
        )
        sources: list[RetainedEncoded] = []
        entries: list[dict[str, Any]] = []
        for index, (ref, source) in enumerate(zip(refs, projected, strict=True)):
            if not isinstance(source, _Projected):
                raise SessionReferenceError(
                    f"reading session {ref.session_id!r} returned {type(source).__name__}",
                    SESSION_REFERENCE_READ_FAILED,
                    session_id=ref.session_id,
                )
            assert ref.label is not None
            retained = retain_encoded(
                session_id=ref.session_id,
                label=ref.label,
                cwd=source.cwd,
                captured_through_seq=source.captured_through_seq,
                messages=source.messages,
                skipped_messages=source.skipped_messages,
                skipped_bytes=source.skipped_bytes,
                max_bytes=self._config.max_reference_bytes,
            )
            sources.append(retained)
            projected[index] = None  # its texts are now only held by what is retained
            entries.append(
                reference_entry(
                    session_id=ref.session_id,
                    label=ref.label,
                    captured_through_seq=source.captured_through_seq,
                    stats=retained.stats,
                    input_index=index,
                )
            )
            await asyncio.sleep(0)  # let the UI breathe between large sources
            _check_cancel(cancel)
        return sources, entries
