"""``MemorySessionStore``: the in-process ``SessionStore`` (tests, previews, ephemeral use)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any

from core.batches import EventBatches
from core.damage import DamagedRow
from core.errors import InvalidEventError, SessionExistsError, SessionNotFoundError, StoreError
from core.jsoncodec import dumps_js
from core.leases import ReplyLease, check_lease_ttl, lease_blocks
from core.log import (
    Event,
    NewEvent,
    SessionHeader,
    SurfaceOutline,
    SurfaceRow,
    ValidatedEvent,
    is_known_event_type,
    now_ms,
)
from core.query import MessageTail, SessionTitle, message_tail
from core.references.projection import projection_code
from core.search import SearchHit, indexed_text
from core.sharing import Share
from core.surface import SurfaceFolder, fold_surface
from stores.appends import ValidatedAppends
from stores.search import plan_search
from stores.sharing import check_grantee, check_owner, check_user, os_user
from stores.surfaces import shadowed_seqs
from stores.validation import (
    KIND_TITLE,
    MARK_TYPES,
    check_batch,
    check_count,
    check_mark_type,
    check_seq_range,
    check_seqs,
    check_session_id,
    check_session_ids,
    event_kind,
    import_header,
    missing_seq_error,
    new_header,
    stored_title,
    validate_batch,
)

__all__ = ["MemorySessionStore"]


@dataclass(slots=True)
class _Session:
    header: SessionHeader
    events: list[Event] = field(default_factory=list)
    # The live surface (seqs only), kept in step with ``events`` so appends stay O(1).
    folder: SurfaceFolder[None] = field(default_factory=SurfaceFolder)
    title_seq: int | None = None
    # The search index (core.search): seq -> (insertion order, indexed text) of the
    # surface's messages (the order across sessions says which match is newest).
    texts: dict[int, tuple[int, str]] = field(default_factory=dict)
    # The latest title event and its title, or why it cannot be one: judged once.
    title_read: tuple[Event, SessionTitle | str] | None = None
    # The seq of the latest event of each type of ``MARK_TYPES`` the log holds (what
    # ``read_latest_events`` returns, without a pass over the log).
    marks: dict[str, int] = field(default_factory=dict)

    def note(self, event: Event) -> None:
        """Keep the latest title and marks in step with an event added to ``events``."""
        if event_kind(event.type, event.data, event.is_surface) == KIND_TITLE:
            self.title_seq = event.seq
        elif event.type in MARK_TYPES:
            self.marks[event.type] = event.seq

    def title(self) -> SessionTitle | str | None:
        """The latest title, or why its event cannot be one (``stored_title``'s words)."""
        if self.title_seq is None:
            return None
        event = self.events[self.title_seq]
        if self.title_read is None or self.title_read[0] is not event:
            try:
                found: SessionTitle | str = stored_title(
                    event.seq, event.time, dumps_js(event.data)
                )
            except (ValueError, TypeError) as err:
                found = str(err)
            self.title_read = (event, found)
        return self.title_read[1]

    def refold(self) -> None:
        folder: SurfaceFolder[None] = SurfaceFolder()
        for event in self.events:
            if event.surface_op is not None:
                folder.apply(event.seq, event.surface_op, event.source_event_seqs, None)
        self.folder = folder


class MemorySessionStore(ValidatedAppends):
    """Keeps everything in memory. Returned events are immutable and share nothing mutable
    with the caller's input (data is re-parsed from its JSON)."""

    def __init__(self, *, user: str | None = None) -> None:
        """``user``: who the store acts as, owning what it creates (default: the OS user)."""
        self._user = os_user() if user is None else check_user(user)
        self._sessions: dict[str, _Session] = {}
        self._closed = False
        self._changes = 0  # bumped by every write: the change token
        self._leases: dict[str, tuple[str, int]] = {}  # session id -> (owner, expires at ms)
        self._shares: dict[str, set[str]] = {}  # session id -> who it is shared with
        self._damaged_titles: tuple[DamagedRow, ...] = ()  # what the latest listing skipped

    def as_user(self, user: str) -> MemorySessionStore:
        """The same sessions, seen by ``user`` (for tests of sharing: another user's
        store on one database)."""
        view = MemorySessionStore(user=user)
        view._sessions, view._leases, view._shares = self._sessions, self._leases, self._shares
        return view

    @property
    def read_only(self) -> bool:
        return False

    def current_user(self) -> str:
        """Who this store acts as: the owner of what it creates."""
        return self._user

    def _readable(self, session: _Session) -> bool:
        return session.header.owner == self._user or self._user in self._shares.get(
            session.header.id, ()
        )

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
        session = self._sessions.get(sid)
        if session is None or not self._readable(session):
            raise SessionNotFoundError(sid) from None
        return session

    def _own(self, session_id: object) -> _Session:
        """A session this user may write: readable (else not found) and theirs."""
        session = self._session(session_id)
        check_owner(session.header.id, session.header.owner, self._user)
        return session

    # ------------------------------------------------------------------ writes

    async def create_session(
        self,
        session_id: str | None = None,
        *,
        cwd: str | None = None,
        created_at: int | None = None,
    ) -> SessionHeader:
        self._open()
        header = replace(new_header(session_id, cwd, created_at), owner=self._user)
        if header.id in self._sessions:
            raise SessionExistsError(header.id)
        self._sessions[header.id] = _Session(header)
        self._changes += 1
        return header

    async def import_session(
        self, header: SessionHeader, events: Sequence[NewEvent] | EventBatches
    ) -> SessionHeader:
        """Create a session with exactly this header and log (seqs from 0), all or nothing.

        A taken id raises ``SessionExistsError``; a bad event ``InvalidEventError``.
        """
        self._open()
        checked = replace(import_header(header), owner=header.owner or self._user)
        batch = [] if isinstance(events, EventBatches) else validate_batch(events)
        if checked.id in self._sessions:
            raise SessionExistsError(checked.id)
        session = _Session(checked)
        self._commit(session, batch)
        while isinstance(events, EventBatches):  # read off the event loop, a batch at a time
            more = await asyncio.to_thread(events.next_batch)
            if more is None:
                break
            self._commit(session, validate_batch(more))
        if checked.id in self._sessions:  # created meanwhile
            raise SessionExistsError(checked.id)
        self._sessions[checked.id] = session
        self._changes += 1
        return checked

    async def _append(self, sid: str, batch: list[ValidatedEvent]) -> list[Event]:
        return self._commit(self._own(sid), batch)

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
            session.note(event)
        _index(session, out)
        return out

    async def delete_session(self, session_id: str) -> None:
        self._own(session_id)
        del self._sessions[session_id]
        self._leases.pop(session_id, None)
        self._shares.pop(session_id, None)
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
        self._own(session_id)
        ttl = check_lease_ttl(ttl_ms)
        now = now_ms()
        held = self._leases.get(session_id)
        if held is not None and lease_blocks(held[0], held[1], owner, now, dead):
            return False
        self._leases[session_id] = (owner, now + ttl)
        return True

    async def release_reply_lease(self, session_id: str, owner: str) -> None:
        self._open()
        held = self._leases.get(session_id)
        if held is not None and held[0] == owner:
            del self._leases[session_id]

    async def renew_reply_lease(self, session_id: str, owner: str, *, ttl_ms: int) -> bool:
        self._own(session_id)
        ttl = check_lease_ttl(ttl_ms)
        held = self._leases.get(session_id)
        if held is None or held[0] != owner:
            return False
        self._leases[session_id] = (owner, now_ms() + ttl)
        return True

    async def read_reply_lease(self, session_id: str) -> ReplyLease | None:
        self._own(session_id)
        held = self._leases.get(session_id)
        return None if held is None else ReplyLease(held[0], held[1] - now_ms())

    async def break_reply_lease(self, session_id: str) -> bool:
        self._own(session_id)
        return self._leases.pop(session_id, None) is not None

    def damaged_rows(self) -> tuple[DamagedRow, ...]:
        # Its own appends are validated; a replayed file's events are not (stores.replay).
        return self._damaged_titles

    # ------------------------------------------------------------------ reads

    async def list_headers(self) -> list[SessionHeader]:
        self._open()
        headers = [s.header for s in self._sessions.values() if self._readable(s)]
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

    async def read_surface_nodes(
        self, session_id: str
    ) -> tuple[SessionHeader, int | None, tuple[int, ...], int]:
        session = self._session(session_id)
        events = session.events
        # The live fold's nodes, not a pass over the log. The newest replace is one of
        # them: only a later replace could shadow it, and there is none.
        seqs = tuple(session.folder.seqs())
        floor = max((seq for seq in seqs if events[seq].surface_op != "append"), default=-1)
        return session.header, events[-1].seq if events else None, seqs, floor

    async def read_surface_tail(
        self, session_id: str, count: int
    ) -> tuple[SessionHeader, int | None, list[SurfaceRow]]:
        limit = check_count(count)
        session = self._session(session_id)
        events = session.events
        # Backwards from the last event: the cost of the tail, not of the log (the app
        # opens a page with this, a replay of a long log included).
        rows: list[SurfaceRow] = []
        for event in reversed(events):
            if len(rows) >= limit:
                break
            if event.surface_op is not None:
                rows.append(SurfaceRow(event.seq, event.surface_op, event.source_event_seqs))
        rows.reverse()
        return session.header, events[-1].seq if events else None, rows

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

    async def read_message_tail(
        self, session_id: str, budget: int
    ) -> tuple[SessionHeader, int | None, MessageTail]:
        # In memory the fold is cheap enough: the tail is computed from the whole surface.
        limit = check_count(budget)
        header, last, rows = await self.read_surface_outline(session_id)
        nodes = [(row.seq, row.projection) for row in fold_surface(rows) if row.projection >= 0]
        return header, last, message_tail(nodes, limit)

    async def read_events_at(self, session_id: str, seqs: Sequence[int]) -> list[Event]:
        session = self._session(session_id)
        wanted = check_seqs(seqs)
        events = session.events
        for seq in wanted:
            if seq >= len(events):
                raise missing_seq_error(session.header.id, seq)
        return [events[seq] for seq in wanted]

    async def read_bodies_at(self, session_id: str, seqs: Sequence[int]) -> list[tuple[str, Any]]:
        return [(e.type, e.data) for e in await self.read_events_at(session_id, seqs)]

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
        damaged: list[DamagedRow] = []
        for sid in wanted:
            session = self._sessions.get(sid)
            if session is None or not self._readable(session):
                continue
            title = session.title()
            if isinstance(title, SessionTitle):
                out[sid] = title
            elif title is not None:
                damaged.append(DamagedRow("title", title, session.header.owner, sid))
        if session_ids is None:
            self._damaged_titles = tuple(damaged)
        return out

    async def read_latest_events(
        self, type: str, session_ids: Sequence[str] | None = None
    ) -> dict[str, Event]:
        mark = check_mark_type(type)
        self._open()
        wanted = list(self._sessions) if session_ids is None else check_session_ids(session_ids)
        out: dict[str, Event] = {}
        for sid in wanted:
            session = self._sessions.get(sid)
            if session is None or not self._readable(session):
                continue
            seq = session.marks.get(mark)
            if seq is not None:
                out[sid] = session.events[seq]
        return out

    async def read_last_event_times(self) -> dict[str, int]:
        self._open()
        return {
            sid: s.events[-1].time
            for sid, s in self._sessions.items()
            if s.events and self._readable(s)
        }

    # ------------------------------------------------------------------ sharing

    async def share(self, session_id: str, user: str) -> bool:
        grantee = check_user(user)
        session = self._own(session_id)
        check_grantee(grantee, self._user)
        grantees = self._shares.setdefault(session.header.id, set())
        if grantee in grantees:
            return False
        grantees.add(grantee)
        self._changes += 1
        return True

    async def unshare(self, session_id: str, user: str) -> bool:
        grantee = check_user(user)
        session = self._own(session_id)
        check_grantee(grantee, self._user)
        grantees = self._shares.get(session.header.id, set())
        if grantee not in grantees:
            return False
        grantees.discard(grantee)
        self._changes += 1
        return True

    async def list_shares(self, session_id: str | None = None) -> list[Share]:
        if session_id is not None:
            sessions = [self._session(session_id)]
        else:
            self._open()
            sessions = [self._sessions[h.id] for h in await self.list_headers()]
        out: list[Share] = []
        for session in sessions:
            owner = session.header.owner or ""
            for grantee in sorted(self._shares.get(session.header.id, ())):
                if self._user in (owner, grantee):  # as the database shows them
                    out.append(Share(session.header.id, owner, grantee))
        return out

    async def unindexed_sessions(self) -> int:
        """Always 0: every message is searchable as soon as it is appended."""
        return 0

    async def search_messages(self, query: str, *, limit: int = 20) -> list[SearchHit]:
        self._open()
        plan = plan_search(query, limit)
        if plan is None:
            return []
        found = [
            (order, sid, seq, text)
            for sid, session in self._sessions.items()
            if self._readable(session)
            for seq, (order, text) in session.texts.items()
        ]
        found.sort(reverse=True)  # newest first
        return plan.rank([row[1:] for row in found])


_INDEX_ORDER = itertools.count()


def _index(session: _Session, events: Sequence[Event]) -> None:
    """Keep the session's search index in step with its surface (see ``core.search``)."""
    texts = session.texts
    for event in events:
        if event.surface_op is None:
            continue
        text = indexed_text(event)
        if text is not None:
            texts[event.seq] = (next(_INDEX_ORDER), text)
    # (After the adds: a message a replace of the same batch shadows goes too.)
    for seq in shadowed_seqs(events, session.folder):
        texts.pop(seq, None)
