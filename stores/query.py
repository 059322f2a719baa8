"""``SessionQuery``: the read side the session-reference service and the UI use."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from core.log import Event, SessionHeader, SurfaceRow
from core.query import (
    MessageTailSnapshot,
    SessionTitle,
    SurfaceOutlineSnapshot,
    SurfaceSnapshot,
    SurfaceWindow,
)
from core.search import SearchHit
from core.surface import fold_surface
from stores.base import SessionStore
from stores.validation import check_session_id

__all__ = ["SessionQuery", "unknown_floor"]


def unknown_floor(rows: Iterable[SurfaceRow | Event]) -> int:
    """The seq of the newest replace among a session's surface rows (``-1``: none).

    Unknown (log-only) events up to it are not shown: they were compacted away, or
    happened while the compaction that wrote it ran. After it every surface event is an
    append, so the unknown events later than it interleave with the surface by seq.
    """
    floor = -1
    for row in rows:
        if row.surface_op is not None and row.surface_op != "append" and row.seq > floor:
            floor = row.seq
    return floor


class SessionQuery:
    """Implements ``core.query.SessionQueryLike`` over any ``SessionStore``."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store

    @property
    def store(self) -> SessionStore:
        return self._store

    async def list_sessions(self) -> list[SessionHeader]:
        """Every session, newest ``created_at`` first, ties by id in code-point order."""
        return await self._store.list_headers()

    async def read_surface(self, session_id: str) -> SurfaceSnapshot:
        """One consistent read of the session folded into its current surface.

        ``captured_through_seq`` is the last raw seq (log-only events count), ``None`` for
        an empty log; ``events`` are in node order and immutable.

        The nodes come from the store's folded surface (``read_surface_nodes``, one
        consistent read), then their events by seq (events never change, so the later
        read gives the very events of that surface): exactly the fold of every surface
        event, read in time bounded by what the surface keeps: after a compaction of a
        1,000,000-event session down to two nodes, about 5 ms instead of 600
        (``tests/benchmarks``' prepare_scale).
        """
        snapshot, _floor = await self._current_surface(session_id)
        return snapshot

    async def _current_surface(self, session_id: str) -> tuple[SurfaceSnapshot, int]:
        """``read_surface`` and the surface's ``unknown_floor``."""
        header, last_seq, seqs, floor = await self._store.read_surface_nodes(session_id)
        events = await self._store.read_events_at(session_id, seqs) if seqs else []
        return SurfaceSnapshot(header, last_seq, tuple(events)), floor

    async def read_surface_outline(self, session_id: str) -> SurfaceOutlineSnapshot:
        """``read_surface`` without event data: the folded surface's outline rows, each
        with what it projects to (``prepare`` reads only the bodies it keeps)."""
        header, last_seq, rows = await self._store.read_surface_outline(session_id)
        return SurfaceOutlineSnapshot(header, last_seq, tuple(fold_surface(rows)))

    async def read_message_tail(self, session_id: str, budget: int) -> MessageTailSnapshot:
        """The surface's newest messages until ``budget`` UTF-8 bytes are spent, its older
        checkpoints and the count and bytes of its other older messages (see
        ``core.query.message_tail``), in time bounded by what is read, not by the session:
        what ``prepare`` reads first (then only the bodies it keeps)."""
        header, last_seq, tail = await self._store.read_message_tail(session_id, budget)
        return MessageTailSnapshot(header, last_seq, tail)

    async def read_surface_tail(self, session_id: str, newest: int) -> SurfaceSnapshot:
        """The last ``newest`` items of the current surface (node order), read in time that
        does not grow with the session when, as usual, none of the newest surface rows is
        a replace: the surface then ends with exactly those rows. Otherwise the surface is
        folded from all its rows (``read_surface_window``), which is always right."""
        if isinstance(newest, bool) or not isinstance(newest, int) or newest < 0:
            raise ValueError(f"newest must be a non-negative int, not {newest!r}")
        header, last_seq, rows = await self._store.read_surface_tail(session_id, newest)
        if all(row.surface_op == "append" for row in rows):
            tail = [row.seq for row in rows]
            events = await self.read_events_at(session_id, tail) if tail else []
            return SurfaceSnapshot(header, last_seq, tuple(events))
        window = await self.read_surface_window(session_id, newest)
        return SurfaceSnapshot(window.session, window.captured_through_seq, window.events)

    async def read_surface_window(self, session_id: str, newest: int) -> SurfaceWindow:
        """The surface's seqs and the events of its ``newest`` last nodes: the seqs and the
        newest replace come from the store's folded surface (``read_surface_nodes``), so
        opening a long session costs one page of data and its nodes' seqs, neither a read
        nor a fold of every surface row."""
        if isinstance(newest, bool) or not isinstance(newest, int) or newest < 0:
            raise ValueError(f"newest must be a non-negative int, not {newest!r}")
        header, last_seq, seqs, floor = await self._store.read_surface_nodes(session_id)
        tail = seqs[len(seqs) - min(newest, len(seqs)) :]
        events = await self.read_events_at(session_id, tail) if tail else []
        low = max(floor, tail[0]) if tail and len(tail) < len(seqs) else floor
        unknown = await self.read_unknown_events(session_id, low, last_seq)
        return SurfaceWindow(
            header, last_seq, seqs, tuple(events), tuple(unknown), unknown_floor=floor
        )

    async def read_surface_page(self, session_id: str, newest: int) -> SurfaceWindow:
        """The newest ``newest`` items of the surface (and the unknown events among them)
        in time that does not grow with the session when none of the newest surface rows
        is a replace (one backwards range of the surface index, as ``read_surface_tail``):
        the window is then ``complete`` only when the surface has no more rows; earlier
        seqs are read when wanted (``read_surface_window``). Otherwise it is
        ``read_surface_window``, which is always right."""
        if isinstance(newest, bool) or not isinstance(newest, int) or newest < 0:
            raise ValueError(f"newest must be a non-negative int, not {newest!r}")
        header, last_seq, rows = await self._store.read_surface_tail(session_id, newest)
        if not newest or any(row.surface_op != "append" for row in rows):
            return await self.read_surface_window(session_id, newest)
        seqs = tuple(row.seq for row in rows)
        events = await self.read_events_at(session_id, seqs) if seqs else []
        complete = len(rows) < newest
        # Every replace is older than these rows: the floor is below them.
        low = -1 if complete else seqs[0]
        unknown = await self.read_unknown_events(session_id, low, last_seq)
        return SurfaceWindow(
            header, last_seq, seqs, tuple(events), tuple(unknown), complete=complete
        )

    async def read_surface_seqs(self, session_id: str) -> tuple[tuple[int, ...], int]:
        """Every seq of the current surface (node order) and its ``unknown_floor``: what
        a transcript opened by ``read_surface_page`` reads when earlier items are wanted
        (the store's folded surface: ``read_surface_nodes``)."""
        _header, _last, seqs, floor = await self._store.read_surface_nodes(session_id)
        return seqs, floor

    async def read_unknown_events(
        self, session_id: str, after: int, through: int | None
    ) -> list[Event]:
        """The session's events of types dsh does not know with ``after < seq <= through``
        (``SessionStore.read_unknown_events``); nothing for an empty range."""
        if through is not None and through <= after:
            return []
        return await self._store.read_unknown_events(session_id, after, through)

    async def read_surface_with_unknown(
        self, session_id: str
    ) -> tuple[SurfaceSnapshot, tuple[Event, ...]]:
        """``read_surface`` and the unknown events that belong to that surface (after its
        newest replace: see ``SurfaceWindow.unknown_floor``), for printing it whole."""
        snapshot, floor = await self._current_surface(session_id)
        last_seq = snapshot.captured_through_seq
        return snapshot, tuple(await self.read_unknown_events(session_id, floor, last_seq))

    async def read_events_at(self, session_id: str, seqs: Sequence[int]) -> list[Event]:
        """The events with these seqs, in the order given (e.g. an earlier page of a window)."""
        return await self._store.read_events_at(session_id, seqs)

    async def read_bodies_at(self, session_id: str, seqs: Sequence[int]) -> list[tuple[str, Any]]:
        """The ``(type, data)`` of the events with these seqs, in the order given (what
        projecting them needs: ``SessionStore.read_bodies_at``)."""
        return await self._store.read_bodies_at(session_id, seqs)

    async def read_title(self, session_id: str) -> SessionTitle | None:
        """The latest title of the session, ``None`` without one (unknown id raises
        ``SessionNotFoundError``)."""
        sid = check_session_id(session_id)
        title = (await self._store.read_titles([sid])).get(sid)
        if title is None:
            await self._store.read_header(sid)  # raises for an unknown session
        return title

    async def read_titles(
        self, session_ids: Sequence[str] | None = None
    ) -> dict[str, SessionTitle]:
        """Latest titles of the given sessions (all when ``None``); untitled or unknown
        sessions are absent."""
        return await self._store.read_titles(session_ids)

    async def read_latest_events(
        self, type: str, session_ids: Sequence[str] | None = None
    ) -> dict[str, Event]:
        """The latest event of ``type`` (one of ``core.log.SESSION_MARK_TYPES``: a
        session's profile, its fork origin, its source) of the given sessions (all when
        ``None``); sessions without one, and unknown ones, are absent (``SessionStore``)."""
        return await self._store.read_latest_events(type, session_ids)

    async def read_last_event_times(self) -> dict[str, int]:
        """When each session last changed: the ``time`` of its last event (highest seq).
        Sessions without events are absent (their ``created_at`` is their last change)."""
        return await self._store.read_last_event_times()

    async def search_messages(self, query: str, *, limit: int = 20) -> list[SearchHit]:
        """Messages that contain every term of ``query``, best first (see
        ``SessionStore.search_messages`` and ``core.search``)."""
        return await self._store.search_messages(query, limit=limit)
