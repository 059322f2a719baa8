"""The ``SessionStore`` protocol (SPEC §3): the seam between the domain and persistence."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from core.batches import EventBatches
from core.damage import DamagedRow
from core.leases import ReplyLease
from core.log import Event, NewEvent, SessionHeader, SurfaceOp, SurfaceOutline, SurfaceRow
from core.query import MessageTail, SessionTitle
from core.search import SearchHit
from core.sharing import Share

__all__ = ["SessionStore"]


@runtime_checkable
class SessionStore(Protocol):
    """Sessions and their logs (SPEC §3), and who may read them (issue 17).

    Every session has an owner (``SessionHeader.owner``): the user the store acts as when
    it was created (``current_user()``). Its owner reads and writes it; a user it is shared with
    (``share``) reads it only; for anyone else it does not exist. So every read and listing
    below sees only what ``user`` may read, reading or writing a session they may not read
    raises ``SessionNotFoundError`` exactly as for a deleted one, and a write (append,
    delete, lease, share) to one they may read but do not own raises
    ``SessionReadOnlyError`` and stores nothing. PostgreSQL enforces this with row-level
    security keyed on the role's ``current_user``; SQLite and the memory store in the store.
    """

    def current_user(self) -> str:
        """Who this store acts as: the PostgreSQL role it connects as, or the OS user
        (SQLite, memory). A method, not a property: ``issubclass`` works only on a
        protocol of methods."""
        ...

    async def create_session(
        self,
        session_id: str | None = None,
        *,
        cwd: str | None = None,
        created_at: int | None = None,
    ) -> SessionHeader: ...

    async def append(
        self,
        session_id: str,
        type: str,
        data: Any,
        *,
        surface_op: SurfaceOp | None = None,
        source_event_seqs: Sequence[int] | None = None,
        time: int | None = None,
    ) -> Event: ...

    async def append_batch(self, session_id: str, events: Sequence[NewEvent]) -> list[Event]: ...

    async def list_headers(self) -> list[SessionHeader]: ...

    async def read_header(self, session_id: str) -> SessionHeader: ...

    async def read_events(self, session_id: str) -> list[Event]: ...

    async def read_surface_events(
        self, session_id: str
    ) -> tuple[SessionHeader, int | None, list[Event]]:
        """Header, last raw seq and the surface events (in seq order) in one consistent read."""
        ...

    async def read_surface_rows(
        self, session_id: str
    ) -> tuple[SessionHeader, int | None, list[SurfaceRow]]:
        """Like ``read_surface_events`` without types, times and data: enough to fold the
        surface and learn its seqs cheaply (then ``read_events_at`` fetches what is shown)."""
        ...

    async def read_surface_nodes(
        self, session_id: str
    ) -> tuple[SessionHeader, int | None, tuple[int, ...], int]:
        """Header, last raw seq, the current surface's seqs in node order and the seq of
        the session's newest replace (``-1``: none; ``stores.query.unknown_floor``), in
        one consistent read: what folding ``read_surface_rows`` gives, without the fold.
        A store keeps the folded surface up to date in each append's transaction (see
        ``read_message_tail``) and finds the newest replace through an index of replaces,
        so opening a long session reads its nodes' seqs, not every surface row."""
        ...

    async def read_surface_tail(
        self, session_id: str, count: int
    ) -> tuple[SessionHeader, int | None, list[SurfaceRow]]:
        """Header, last raw seq and the session's ``count`` highest-seq surface rows (as
        ``read_surface_rows`` gives them: every event with a surface op, folded or not),
        in seq order; fewer when it has fewer. One consistent read whose cost does not
        grow with the session (SQLite: one backwards range of the surface index).
        ``count`` is a non-negative int (else ``ValueError``)."""
        ...

    async def read_surface_outline(
        self, session_id: str
    ) -> tuple[SessionHeader, int | None, list[SurfaceOutline]]:
        """Like ``read_surface_rows`` (same rows, same order, one consistent read), each row
        with its event's ``projection``: ``core.references.projection.projection_code`` of
        the event (``-1``: no message; else ``4 * UTF-8 bytes of the projected text +
        2 * checkpoint + 1 for an assistant message``). A store computes it when the event
        is appended and keeps it beside the event (the SQLite store in a column; rows
        written before it existed are computed at read time), so reading it costs no
        event data: ``prepare`` then reads only the bodies retention keeps."""
        ...

    async def read_message_tail(
        self, session_id: str, budget: int
    ) -> tuple[SessionHeader, int | None, MessageTail]:
        """Header, last raw seq and the folded surface's ``core.query.MessageTail`` for
        ``budget`` (a non-negative int, else ``ValueError``), in one consistent read:
        exactly ``core.query.message_tail`` of the surface's message nodes, read in time
        bounded by the tail (not by the session): a store keeps the current surface's
        nodes (node order, projection codes) and the count and UTF-8 bytes of its
        non-checkpoint messages up to date in each append's transaction, so ``prepare``
        reads the newest nodes until the budget is spent, the checkpoints, and two sums."""
        ...

    async def read_events_at(self, session_id: str, seqs: Sequence[int]) -> list[Event]:
        """The events with these seqs, in the order given (an unknown seq is an
        ``InvalidEventError``; events never change, so any earlier read's seqs are valid)."""
        ...

    async def read_bodies_at(self, session_id: str, seqs: Sequence[int]) -> list[tuple[str, Any]]:
        """The ``(type, data)`` of the events with these seqs, in the order given: exactly
        those of ``read_events_at`` (same checks, same errors), without reading or decoding
        anything else (a compaction checkpoint's source seqs can be far larger than its
        data: ``prepare`` reads message bodies this way)."""
        ...

    async def read_unknown_events(
        self, session_id: str, after: int = -1, through: int | None = None
    ) -> list[Event]:
        """The session's events of a type dsh does not know (not in
        ``core.log.KNOWN_EVENT_TYPES``: always log-only, stored verbatim) whose seq is
        greater than ``after`` and at most ``through`` (``None``: to the end), in seq
        order. The transcript shows them as generic collapsed items among the surface
        items; reading a seq range costs what the range holds, not the session (SQLite:
        one range of the primary key; packed runs are opened only to look at their
        types). ``after`` and ``through`` are ints ``>= -1`` (``through`` may be ``None``;
        else ``ValueError``)."""
        ...

    async def read_titles(
        self, session_ids: Sequence[str] | None = None
    ) -> dict[str, SessionTitle]:
        """Latest title of each given session (all sessions when ``None``), one query."""
        ...

    async def read_latest_events(
        self, type: str, session_ids: Sequence[str] | None = None
    ) -> dict[str, Event]:
        """The latest (highest-seq) event of ``type`` in each given session (every readable
        session when ``None``) that has one, in one query that does not read the sessions'
        other events. ``type`` is one of ``core.log.SESSION_MARK_TYPES`` (else
        ``ValueError``): a session's profile, its fork origin, where an imported session
        came from.

        Each event is exactly as stored (as ``read_events`` gives it). Sessions without
        such an event, unknown ids and sessions the user may not read are absent; a row
        that cannot be read (another member's, written by hand) leaves its session out,
        as ``read_titles`` does, instead of failing the listing. A store finds these
        events through an index of their types (SQLite stores each alone, never in a
        pack), so the cost grows with the sessions asked about, not with their logs."""
        ...

    async def read_last_event_times(self) -> dict[str, int]:
        """The ``time`` of each session's last event (highest seq), one query over all
        sessions; sessions without events are absent."""
        ...

    async def search_messages(self, query: str, *, limit: int = 20) -> list[SearchHit]:
        """The messages that contain every term of ``query``, best first (at most
        ``limit``, a positive int, else ``ValueError``; a blank query finds nothing).

        Searches the search index: the whole text of each user and assistant message on
        the current surface of every session the store lets its user read (a compaction
        checkpoint's summary included; never reasoning, tool output or a reference
        snapshot's content). The index is written in the transaction of the append that
        adds a message, loses a message in the transaction of the replace that shadows it,
        and a deleted session's entries go with it. Matching, ranking (BM25 or its
        equivalent) and the hit's snippet and spans follow ``core.search`` exactly."""
        ...

    async def import_session(
        self, header: SessionHeader, events: Sequence[NewEvent] | EventBatches
    ) -> SessionHeader:
        """Create a session with exactly this header and log (seqs from 0), all or nothing.
        ``EventBatches`` are taken one batch at a time in the same transaction (read off
        the event loop): a problem in any batch, or raised while producing one, stores
        nothing."""
        ...

    async def delete_session(self, session_id: str) -> None: ...

    async def share(self, session_id: str, user: str) -> bool:
        """Let ``user`` read (never write) a session of one's own; ``False`` when it was
        shared with them already. Only the owner shares (``SessionReadOnlyError``); a user
        the database does not know, an empty name or oneself is ``ShareError``."""
        ...

    async def unshare(self, session_id: str, user: str) -> bool:
        """Take back what ``share`` gave; ``False`` when it was not shared with ``user``."""
        ...

    async def list_shares(self, session_id: str | None = None) -> list[Share]:
        """The grants one may see: on one session (readable, else ``SessionNotFoundError``)
        or on all. An owner sees every grant on their sessions, a grantee only their own."""
        ...

    async def change_token(self) -> int:
        """A number that changes whenever another writer may have changed the store: for
        SQLite a commit by another connection; the memory store, shared by every writer in
        its process, counts every write. Cheap enough to poll about twice a second."""
        ...

    async def last_surface_seq(self, session_id: str) -> int | None:
        """The seq of the session's newest surface event (``None`` when it has none): a
        cheap way to learn that its transcript changed."""
        ...

    async def take_reply_lease(
        self,
        session_id: str,
        owner: str,
        *,
        ttl_ms: int,
        dead: Callable[[str], bool] | None = None,
    ) -> bool:
        """Take (or renew, for the same ``owner``) the session's reply lease for ``ttl_ms``.

        ``False`` when another owner holds an unexpired lease; an expired one, or one whose
        owner ``dead`` says is gone (a killed process), is taken over. One reply at a time
        per session, across processes.
        """
        ...

    async def release_reply_lease(self, session_id: str, owner: str) -> None:
        """Give the lease back if ``owner`` still holds it (no error otherwise)."""
        ...

    async def renew_reply_lease(self, session_id: str, owner: str, *, ttl_ms: int) -> bool:
        """Extend ``owner``'s lease by ``ttl_ms`` from now, in one step, only while it is
        still theirs (run out or not): ``False`` when it was broken (``dsh unlock``) or
        another holds it, so a renewal never takes back what was taken from it. A TTL
        over ``core.leases.MAX_LEASE_TTL_MS`` is ``ValueError``."""
        ...

    async def read_reply_lease(self, session_id: str) -> ReplyLease | None:
        """The session's reply lease as its owner sees it (``None``: no lease at all;
        one that has run out is returned too, with ``expires_in_ms <= 0``). Only the
        owner reads it (``SessionReadOnlyError`` for a session shared with one): the
        holder names a host and a process, which is nobody else's business."""
        ...

    async def break_reply_lease(self, session_id: str) -> bool:
        """Remove the session's reply lease whoever holds it (``dsh unlock``: a holder
        that is gone without giving it back); ``False`` when there was none. Only the
        owner (``SessionReadOnlyError``)."""
        ...

    def damaged_rows(self) -> tuple[DamagedRow, ...]:
        """The rows the latest ``list_headers`` or ``read_titles`` skipped because they
        could not be read (``core.damage``): another member's hostile or corrupt rows
        cost a line each, never the listing."""
        ...

    async def close(self) -> None: ...
