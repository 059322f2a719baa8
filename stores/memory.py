"""``MemorySessionStore``: the in-process ``SessionStore`` (tests, previews, ephemeral use)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from core.errors import InvalidEventError, SessionExistsError, SessionNotFoundError, StoreError
from core.log import (
    Event,
    NewEvent,
    SessionHeader,
    SurfaceOp,
    SurfaceOutline,
    SurfaceRow,
    ValidatedEvent,
    is_known_event_type,
    now_ms,
)
from core.query import SessionTitle
from core.references.projection import projection_code
from core.surface import SurfaceFolder
from stores.validation import (
    KIND_TITLE,
    check_batch,
    check_count,
    check_seq_range,
    check_seqs,
    check_session_id,
    check_session_ids,
    event_kind,
    import_header,
    missing_seq_error,
    new_header,
    title_of,
    validate_batch,
    validate_event,
)

__all__ = ["MemorySessionStore"]


@dataclass(slots=True)
class _Session:
    header: SessionHeader
    events: list[Event] = field(default_factory=list)
    # The live surface (seqs only), kept in step with ``events`` so appends stay O(1).
    folder: SurfaceFolder[None] = field(default_factory=SurfaceFolder)
    title_seq: int | None = None

    def refold(self) -> None:
        folder: SurfaceFolder[None] = SurfaceFolder()
        for event in self.events:
            if event.surface_op is not None:
                folder.apply(event.seq, event.surface_op, event.source_event_seqs, None)
        self.folder = folder


class MemorySessionStore:
    """Keeps everything in memory. Returned events are immutable and share nothing mutable
    with the caller's input (data is re-parsed from its JSON)."""

    def __init__(self) -> None:
        self._sessions: dict[str, _Session] = {}
        self._closed = False
        self._changes = 0  # bumped by every write: the change token
        self._leases: dict[str, tuple[str, int]] = {}  # session id -> (owner, expires at ms)

    @property
    def read_only(self) -> bool:
        return False

    async def __aenter__(self) -> MemorySessionStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        self._closed = True

    def _open(self) -> None:
        if self._closed:
            raise StoreError("the memory store is closed")

    def _session(self, session_id: object) -> _Session:
        self._open()
        sid = check_session_id(session_id)
        try:
            return self._sessions[sid]
        except KeyError:
            raise SessionNotFoundError(sid) from None

    # ------------------------------------------------------------------ writes

    async def create_session(
        self,
        session_id: str | None = None,
        *,
        cwd: str | None = None,
        created_at: int | None = None,
    ) -> SessionHeader:
        self._open()
        header = new_header(session_id, cwd, created_at)
        if header.id in self._sessions:
            raise SessionExistsError(header.id)
        self._sessions[header.id] = _Session(header)
        self._changes += 1
        return header

    async def import_session(
        self, header: SessionHeader, events: Sequence[NewEvent]
    ) -> SessionHeader:
        """Create a session with exactly this header and log (seqs from 0), all or nothing.

        A taken id raises ``SessionExistsError``; a bad event ``InvalidEventError``.
        """
        self._open()
        checked = import_header(header)
        batch = validate_batch(events)
        if checked.id in self._sessions:
            raise SessionExistsError(checked.id)
        session = _Session(checked)
        self._commit(session, batch)
        self._sessions[checked.id] = session
        self._changes += 1
        return checked

    async def append(
        self,
        session_id: str,
        type: str,
        data: Any,
        *,
        surface_op: SurfaceOp | None = None,
        source_event_seqs: Sequence[int] | None = None,
        time: int | None = None,
    ) -> Event:
        check_session_id(session_id)
        validated = validate_event(type, data, surface_op, source_event_seqs, time)
        return self._commit(self._session(session_id), [validated])[0]

    async def append_batch(self, session_id: str, events: Sequence[NewEvent]) -> list[Event]:
        check_session_id(session_id)
        batch = validate_batch(events)
        return self._commit(self._session(session_id), batch)

    def _commit(self, session: _Session, batch: list[ValidatedEvent]) -> list[Event]:
        # Same order of checks as every store: event shape, then the session, then the
        # log-state rules against its surface.
        first = len(session.events)
        try:
            check_batch(session.folder, first, batch)
        except InvalidEventError:
            session.refold()  # the folder may hold part of the rejected batch
            raise
        out = [
            Event(
                seq=first + offset,
                type=v.type,
                time=v.time,
                data=v.data,
                surface_op=v.surface_op,
                source_event_seqs=v.source_event_seqs,
            )
            for offset, v in enumerate(batch)
        ]
        session.events.extend(out)
        self._changes += 1
        for event in out:
            if event_kind(event.type, event.data, event.is_surface) == KIND_TITLE:
                session.title_seq = event.seq
        return out

    async def delete_session(self, session_id: str) -> None:
        self._session(session_id)
        del self._sessions[session_id]
        self._leases.pop(session_id, None)
        self._changes += 1

    async def change_token(self) -> int:
        self._open()
        return self._changes

    async def last_surface_seq(self, session_id: str) -> int | None:
        session = self._session(session_id)
        for event in reversed(session.events):
            if event.is_surface:
                return event.seq
        return None

    async def take_reply_lease(
        self,
        session_id: str,
        owner: str,
        *,
        ttl_ms: int,
        dead: Callable[[str], bool] | None = None,
    ) -> bool:
        self._session(session_id)
        now = now_ms()
        held = self._leases.get(session_id)
        if (
            held is not None
            and held[0] != owner
            and held[1] > now
            and not (dead is not None and dead(held[0]))
        ):
            return False
        self._leases[session_id] = (owner, now + ttl_ms)
        return True

    async def release_reply_lease(self, session_id: str, owner: str) -> None:
        self._open()
        held = self._leases.get(session_id)
        if held is not None and held[0] == owner:
            del self._leases[session_id]

    # ------------------------------------------------------------------ reads

    async def list_headers(self) -> list[SessionHeader]:
        self._open()
        headers = [s.header for s in self._sessions.values()]
        headers.sort(key=lambda h: h.id)
        headers.sort(key=lambda h: h.created_at, reverse=True)
        return headers

    async def read_header(self, session_id: str) -> SessionHeader:
        return self._session(session_id).header

    async def read_events(self, session_id: str) -> list[Event]:
        return list(self._session(session_id).events)

    async def read_surface_events(
        self, session_id: str
    ) -> tuple[SessionHeader, int | None, list[Event]]:
        session = self._session(session_id)
        events = session.events
        last = events[-1].seq if events else None
        return session.header, last, [e for e in events if e.is_surface]

    async def read_surface_rows(
        self, session_id: str
    ) -> tuple[SessionHeader, int | None, list[SurfaceRow]]:
        header, last, events = await self.read_surface_events(session_id)
        return (
            header,
            last,
            [
                SurfaceRow(e.seq, e.surface_op, e.source_event_seqs)
                for e in events
                if e.surface_op is not None
            ],
        )

    async def read_surface_tail(
        self, session_id: str, count: int
    ) -> tuple[SessionHeader, int | None, list[SurfaceRow]]:
        limit = check_count(count)
        header, last, rows = await self.read_surface_rows(session_id)
        return header, last, rows[len(rows) - min(limit, len(rows)) :]

    async def read_surface_outline(
        self, session_id: str
    ) -> tuple[SessionHeader, int | None, list[SurfaceOutline]]:
        header, last, events = await self.read_surface_events(session_id)
        return (
            header,
            last,
            [
                SurfaceOutline(e.seq, e.surface_op, e.source_event_seqs, projection_code(e))
                for e in events
                if e.surface_op is not None
            ],
        )

    async def read_events_at(self, session_id: str, seqs: Sequence[int]) -> list[Event]:
        session = self._session(session_id)
        wanted = check_seqs(seqs)
        events = session.events
        for seq in wanted:
            if seq >= len(events):
                raise missing_seq_error(session.header.id, seq)
        return [events[seq] for seq in wanted]

    async def read_unknown_events(
        self, session_id: str, after: int = -1, through: int | None = None
    ) -> list[Event]:
        session = self._session(session_id)
        low, high = check_seq_range(after, through)
        events = session.events
        stop = len(events) if high is None else min(len(events), high + 1)
        return [e for e in events[low + 1 : stop] if not is_known_event_type(e.type)]

    async def read_titles(
        self, session_ids: Sequence[str] | None = None
    ) -> dict[str, SessionTitle]:
        self._open()
        if session_ids is None:
            wanted: Sequence[str] = list(self._sessions)
        else:
            wanted = check_session_ids(session_ids)
        out: dict[str, SessionTitle] = {}
        for sid in wanted:
            session = self._sessions.get(sid)
            if session is None or session.title_seq is None:
                continue
            event = session.events[session.title_seq]
            out[sid] = title_of(event.seq, event.time, event.data)
        return out

    async def read_last_event_times(self) -> dict[str, int]:
        self._open()
        return {sid: s.events[-1].time for sid, s in self._sessions.items() if s.events}
