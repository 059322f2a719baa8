"""The PostgreSQL store's reads: headers, events, the surface (rows, nodes, outline, tail),
titles and marks, each in one transaction (one snapshot when it reads several times).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import asyncpg

from core.damage import DamagedRow
from core.errors import StoreError
from core.jsoncodec import loads_exact
from core.log import KNOWN_EVENT_TYPES, Event, SessionHeader, SurfaceOutline, SurfaceRow
from core.query import MessageTail, SessionTitle, TailWalk
from core.references.projection import projection_code
from stores.columns import decode_op, decode_text, encode_text
from stores.postgres.connection import PgConnection, T
from stores.postgres.rows import (
    HEADERS_SQL,
    LAST_EVENT_TIMES_SQL,
    TITLES_SQL,
    WANTED_SESSIONS,
    build_headers,
    build_latest_events,
    build_titles,
    latest_events_sql,
    read_id,
)
from stores.postgres.surfaces import _IS_REPLACE
from stores.validation import (
    KIND_LOG,
    KIND_SURFACE,
    check_count,
    check_mark_type,
    check_seq_range,
    check_seqs,
    check_session_id,
    check_session_ids,
    missing_seq_error,
)

_EVENT_COLUMNS = "seq, type, time, data, surface_op, source_event_seqs"


class Reads(PgConnection):
    """Every read of sessions and events, and the listings kept while nothing changed."""

    def damaged_rows(self) -> tuple[DamagedRow, ...]:
        return self._damaged_sessions + self._damaged_titles

    # ------------------------------------------------------------------ reads

    async def last_surface_seq(self, session_id: str) -> int | None:
        sid = check_session_id(session_id)

        async def body(conn: asyncpg.Connection) -> int | None:
            key, _ = await self._require_session(conn, sid)
            last = await conn.fetchval(
                "SELECT seq FROM dsh_events WHERE session_key = $1 "
                f"AND kind = {KIND_SURFACE} ORDER BY seq DESC LIMIT 1",
                key,
            )
            return None if last is None else int(last)

        return await self._run(body, write=False)

    async def _listing(self, name: str, sql: str, build: Callable[[list[Any]], Any]) -> Any:
        """A whole listing (every header, every title, …), reused while the database is
        unchanged: the key is the transaction's snapshot, read in the same repeatable-read
        transaction as the rows, so equal keys see exactly the same committed data (any
        commit anywhere, ours included, changes it; reads never do). The ``@`` picker
        lists every session on each keystroke: then that costs one small query."""

        async def body(conn: asyncpg.Connection) -> tuple[str, Any, list[Any]]:
            key = str(await conn.fetchval("SELECT pg_current_snapshot()::text"))
            cached = self._listings.get(name)
            if cached is not None and cached[0] == key:
                return key, cached[1], []
            return key, None, list(await conn.fetch(sql))

        key, cached, rows = await self._run(body, write=False, isolation="repeatable_read")
        if cached is not None:
            return cached
        # Building 100,000 entries takes a while: not on the event loop.
        value = await asyncio.to_thread(build, rows)
        self._listings[name] = (key, value)
        return value

    async def list_headers(self) -> list[SessionHeader]:
        headers, damaged = await self._listing("headers", HEADERS_SQL, build_headers)
        self._damaged_sessions = damaged
        return list(headers)

    async def read_header(self, session_id: str) -> SessionHeader:
        sid = check_session_id(session_id)

        async def body(conn: asyncpg.Connection) -> SessionHeader:
            return (await self._require_session(conn, sid))[1]

        return await self._run(body, write=False)

    async def read_events(self, session_id: str) -> list[Event]:
        sid = check_session_id(session_id)

        async def body(conn: asyncpg.Connection) -> list[Any]:
            key, _ = await self._require_session(conn, sid)
            return list(
                await conn.fetch(
                    f"SELECT {_EVENT_COLUMNS} FROM dsh_events WHERE session_key = $1 ORDER BY seq",
                    key,
                )
            )

        rows = await self._run(body, write=False)
        return await asyncio.to_thread(self._decode_events, rows)

    async def read_surface_events(
        self, session_id: str
    ) -> tuple[SessionHeader, int | None, list[Event]]:
        return await self._read_surface(session_id, _EVENT_COLUMNS, self._decode_events)

    async def read_surface_rows(
        self, session_id: str
    ) -> tuple[SessionHeader, int | None, list[SurfaceRow]]:
        return await self._read_surface(
            session_id, "seq, surface_op, source_event_seqs", self._decode_surface_rows
        )

    async def read_surface_nodes(
        self, session_id: str
    ) -> tuple[SessionHeader, int | None, tuple[int, ...], int]:
        sid = check_session_id(session_id)

        async def body(conn: asyncpg.Connection) -> tuple[SessionHeader, Any, list[Any], int]:
            key, header = await self._require_session(conn, sid)
            last = await conn.fetchval(
                "SELECT seq FROM dsh_events WHERE session_key = $1 ORDER BY seq DESC LIMIT 1",
                key,
            )
            # dsh_surface_nodes' primary key, in node order: no event read, no fold.
            seqs = await conn.fetch(
                "SELECT seq FROM dsh_surface_nodes WHERE session_key = $1 ORDER BY pos", key
            )
            # dsh_events_replaces backwards: the newest replace is its last entry (its
            # op decoded, so one that does not decode is a StoreError, as in a fold).
            floor = -1
            async for seq, op in conn.cursor(
                "SELECT seq, surface_op FROM dsh_events "
                f"WHERE session_key = $1 AND {_IS_REPLACE} ORDER BY seq DESC",
                key,
                prefetch=4,
            ):
                try:
                    if decode_op(op) != "append":
                        floor = seq
                        break
                except (ValueError, TypeError) as err:
                    raise StoreError(f"{self.location}: a stored event is corrupt ({err})") from err
            return header, last, seqs, floor

        # One snapshot for the four reads.
        header, last, rows, floor = await self._run(body, write=False, isolation="repeatable_read")
        return header, last, tuple([row[0] for row in rows]), floor

    async def read_surface_tail(
        self, session_id: str, count: int
    ) -> tuple[SessionHeader, int | None, list[SurfaceRow]]:
        limit = check_count(count)
        return await self._read_surface(
            session_id, "seq, surface_op, source_event_seqs", self._decode_surface_rows, limit
        )

    async def read_surface_outline(
        self, session_id: str
    ) -> tuple[SessionHeader, int | None, list[SurfaceOutline]]:
        header, last, rows = await self._read_surface(
            session_id, "seq, surface_op, source_event_seqs, projection", list
        )
        missing = [row[0] for row in rows if row[3] is None]  # written before schema 2
        codes: dict[int, int] = {}
        if missing:
            events = await self.read_events_at(session_id, missing)
            codes = {event.seq: projection_code(event) for event in events}
        surface = await asyncio.to_thread(self._decode_surface_rows, [row[:3] for row in rows])
        outline = [
            SurfaceOutline(
                row.seq,
                row.surface_op,
                row.source_event_seqs,
                codes[row.seq] if raw[3] is None else raw[3],
            )
            for row, raw in zip(surface, rows, strict=True)
        ]
        return header, last, outline

    async def read_message_tail(
        self, session_id: str, budget: int
    ) -> tuple[SessionHeader, int | None, MessageTail]:
        sid = check_session_id(session_id)
        limit = check_count(budget)

        async def body(conn: asyncpg.Connection) -> tuple[SessionHeader, int | None, MessageTail]:
            key, header = await self._require_session(conn, sid)
            last = await conn.fetchval(
                "SELECT seq FROM dsh_events WHERE session_key = $1 ORDER BY seq DESC LIMIT 1",
                key,
            )
            walk = TailWalk(limit)
            # Newest first along dsh_surface_messages; stops once the budget is spent.
            async for pos, seq, code in conn.cursor(
                "SELECT pos, seq, projection FROM dsh_surface_nodes "
                "WHERE session_key = $1 AND projection >= 0 ORDER BY pos DESC",
                key,
                prefetch=128,
            ):
                if walk.take(pos, seq, code):
                    break
            if not walk.exceeded:
                return header, last, walk.tail()
            checkpoints = await conn.fetch(
                "SELECT seq, projection FROM dsh_surface_nodes WHERE session_key = $1 "
                "AND projection >= 0 AND (projection & 2) = 2 AND pos < $2 ORDER BY pos",
                key,
                walk.start,
            )
            row = await conn.fetchrow(
                "SELECT messages, bytes FROM dsh_surface_sums WHERE session_key = $1", key
            )
            messages, size = (0, 0) if row is None else (row[0], row[1])
            return header, last, walk.tail(checkpoints, messages, size)

        return await self._run(body, write=False, isolation="repeatable_read")

    async def _read_surface(
        self,
        session_id: str,
        columns: str,
        decode: Callable[[list[Any]], list[T]],
        newest: int | None = None,
    ) -> tuple[SessionHeader, int | None, list[T]]:
        """The surface rows in seq order: all of them, or only the ``newest`` (read
        backwards through the surface index)."""
        sid = check_session_id(session_id)

        async def body(
            conn: asyncpg.Connection,
        ) -> tuple[SessionHeader, int | None, list[Any]]:
            key, header = await self._require_session(conn, sid)
            last = await conn.fetchval(
                "SELECT seq FROM dsh_events WHERE session_key = $1 ORDER BY seq DESC LIMIT 1",
                key,
            )
            if newest is None:
                rows = await conn.fetch(
                    f"SELECT {columns} FROM dsh_events "
                    f"WHERE session_key = $1 AND kind = {KIND_SURFACE} ORDER BY seq",
                    key,
                )
                return header, last, list(rows)
            rows = await conn.fetch(
                f"SELECT {columns} FROM dsh_events "
                f"WHERE session_key = $1 AND kind = {KIND_SURFACE} ORDER BY seq DESC LIMIT $2",
                key,
                newest,
            )
            return header, last, list(reversed(rows))

        # One snapshot for the three reads.
        header, last, rows = await self._run(body, write=False, isolation="repeatable_read")
        return header, last, await asyncio.to_thread(decode, rows)

    async def read_events_at(self, session_id: str, seqs: Sequence[int]) -> list[Event]:
        sid = check_session_id(session_id)
        wanted = check_seqs(seqs)

        async def body(conn: asyncpg.Connection) -> list[Any]:
            key, _ = await self._require_session(conn, sid)
            if not wanted:
                return []
            return list(
                await conn.fetch(
                    f"SELECT {_EVENT_COLUMNS} FROM dsh_events "
                    "WHERE session_key = $1 AND seq = ANY($2::bigint[])",
                    key,
                    sorted(set(wanted)),
                )
            )

        rows = await self._run(body, write=False)
        by_seq = {event.seq: event for event in await asyncio.to_thread(self._decode_events, rows)}
        for seq in wanted:
            if seq not in by_seq:
                raise missing_seq_error(sid, seq)
        return [by_seq[seq] for seq in wanted]

    async def read_bodies_at(self, session_id: str, seqs: Sequence[int]) -> list[tuple[str, Any]]:
        sid = check_session_id(session_id)
        wanted = check_seqs(seqs)

        async def body(conn: asyncpg.Connection) -> list[Any]:
            key, _ = await self._require_session(conn, sid)
            if not wanted:
                return []
            return list(
                await conn.fetch(
                    "SELECT seq, type, data FROM dsh_events "
                    "WHERE session_key = $1 AND seq = ANY($2::bigint[])",
                    key,
                    sorted(set(wanted)),
                )
            )

        def decode(rows: list[Any]) -> dict[int, tuple[str, Any]]:
            try:
                return {seq: (decode_text(t), loads_exact(data)) for seq, t, data in rows}
            except (ValueError, TypeError) as err:
                raise StoreError(f"{self.location}: a stored event is corrupt ({err})") from err

        found = await asyncio.to_thread(decode, await self._run(body, write=False))
        for seq in wanted:
            if seq not in found:
                raise missing_seq_error(sid, seq)
        return [found[seq] for seq in wanted]

    async def read_unknown_events(
        self, session_id: str, after: int = -1, through: int | None = None
    ) -> list[Event]:
        sid = check_session_id(session_id)
        low, high = check_seq_range(after, through)
        known = sorted(encode_text(t) for t in KNOWN_EVENT_TYPES)

        async def body(conn: asyncpg.Connection) -> list[Any]:
            key, _ = await self._require_session(conn, sid)
            # One range of the primary key; the type test is a filter on its rows.
            return list(
                await conn.fetch(
                    f"SELECT {_EVENT_COLUMNS} FROM dsh_events WHERE session_key = $1 "
                    f"AND seq > $2 AND ($3::bigint IS NULL OR seq <= $3) AND kind = {KIND_LOG} "
                    "AND NOT (type = ANY($4::bytea[])) ORDER BY seq",
                    key,
                    low,
                    high,
                    known,
                )
            )

        rows = await self._run(body, write=False)
        return await asyncio.to_thread(self._decode_events, rows)

    async def read_titles(
        self, session_ids: Sequence[str] | None = None
    ) -> dict[str, SessionTitle]:
        wanted = None if session_ids is None else check_session_ids(session_ids)
        if wanted is not None and not wanted:
            return {}

        if wanted is None:
            every, damaged = await self._listing(
                "titles", TITLES_SQL.format(sessions="dsh_sessions"), build_titles
            )
            self._damaged_titles = damaged
            return dict(every)

        async def body(conn: asyncpg.Connection) -> list[Any]:
            return list(
                await conn.fetch(
                    TITLES_SQL.format(sessions=WANTED_SESSIONS), [encode_text(s) for s in wanted]
                )
            )

        rows = await self._run(body, write=False)
        return (await asyncio.to_thread(build_titles, rows))[0]

    async def read_latest_events(
        self, type: str, session_ids: Sequence[str] | None = None
    ) -> dict[str, Event]:
        mark = check_mark_type(type)
        wanted = None if session_ids is None else check_session_ids(session_ids)
        if wanted is not None and not wanted:
            return {}
        if wanted is None:
            every: dict[str, Event] = await self._listing(
                f"latest {mark}", latest_events_sql(mark, "dsh_sessions"), build_latest_events
            )
            return dict(every)

        async def body(conn: asyncpg.Connection) -> list[Any]:
            return list(
                await conn.fetch(
                    latest_events_sql(mark, WANTED_SESSIONS), [encode_text(s) for s in wanted]
                )
            )

        rows = await self._run(body, write=False)
        return await asyncio.to_thread(build_latest_events, rows)

    async def read_last_event_times(self) -> dict[str, int]:
        times: dict[str, int] = await self._listing(
            "last_event_times",
            LAST_EVENT_TIMES_SQL,
            lambda rows: {
                sid: time
                for raw, size, time in rows
                if time is not None and (sid := read_id(raw, size)) is not None
            },
        )
        return dict(times)
