"""The PostgreSQL store's writes: sessions created, imported and deleted, events appended
(a plain append in one statement; a batch with replaces checked against the surface).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

import asyncpg

from core.batches import EventBatches
from core.errors import SessionExistsError, SessionNotFoundError, SessionReadOnlyError
from core.log import Event, NewEvent, SessionHeader, ValidatedEvent, build_event
from core.references.projection import MessageSums, projection_code
from core.surface import SurfaceFolder
from stores.appends import ValidatedAppends
from stores.columns import APPEND_JSON, encode_op, encode_seqs, encode_text
from stores.postgres.connection import _BUMP, _BY_ID, CHANGES_CHANNEL, PgConnection
from stores.postgres.search import _index_events
from stores.postgres.surfaces import _track_surface
from stores.surfaces import fold_stored
from stores.validation import (
    KIND_SURFACE,
    batch_has_replace,
    check_batch,
    check_session_id,
    event_kind,
    import_header,
    new_header,
    validate_batch,
)


class Writes(ValidatedAppends, PgConnection):
    """Creating, appending to, importing and deleting sessions."""

    # ------------------------------------------------------------------ writes

    async def create_session(
        self,
        session_id: str | None = None,
        *,
        cwd: str | None = None,
        created_at: int | None = None,
    ) -> SessionHeader:
        header = dataclasses.replace(new_header(session_id, cwd, created_at), owner=self._user)

        async def body(conn: asyncpg.Connection) -> SessionHeader:
            await _insert_session(conn, header, 0)
            return header

        return await self._run(body, write=True)

    async def _append(self, sid: str, batch: list[ValidatedEvent]) -> list[Event]:
        if batch and all(
            v.surface_op in (None, "append") and v.source_event_seqs is None for v in batch
        ):
            return await self._append_plain(sid, batch)

        async def body(conn: asyncpg.Connection) -> list[Event]:
            # Reserving the seqs locks the session row: appends to it queue here.
            row = await conn.fetchrow(
                f"UPDATE dsh_sessions SET next_seq = next_seq + $2 WHERE {_BY_ID} "
                "RETURNING key, next_seq - $2",
                encode_text(sid),
                len(batch),
            )
            if row is None:
                await self._refuse(conn, sid)
            key, first = row
            if not batch:
                return []
            folder: SurfaceFolder[None] = SurfaceFolder()
            if batch_has_replace(batch):
                folder = fold_stored(
                    await conn.fetch(
                        "SELECT seq, surface_op, source_event_seqs FROM dsh_events "
                        f"WHERE session_key = $1 AND kind = {KIND_SURFACE} ORDER BY seq",
                        key,
                    )
                )
            return await _insert_events(conn, key, first, folder, batch)

        return await self._run(body, write=True)

    async def _append_plain(self, sid: str, batch: list[ValidatedEvent]) -> list[Event]:
        """Appends without replaces or provenance (nearly every append): no surface rule
        can fail, so reserving the seqs, inserting and notifying is one statement, one round
        trip, atomic on its own."""
        kinds = [event_kind(v.type, v.data, v.surface_op is not None) for v in batch]
        codes = [_projection(v) for v in batch]
        sums = MessageSums(codes)

        async def body(conn: asyncpg.Connection) -> int | None:
            first: int | None = await conn.fetchval(
                _APPEND_PLAIN_SQL,
                encode_text(sid),
                len(batch),
                [encode_text(v.type) for v in batch],
                [v.time for v in batch],
                kinds,
                [v.data_json for v in batch],
                [None if v.surface_op is None else APPEND_JSON for v in batch],
                CHANGES_CHANNEL,
                self._token,
                codes,
                sums.messages,
                sums.bytes,
            )
            if first is None:
                await self._refuse(conn, sid)
            return first

        first = await self._run(body, write=True, isolation=None)
        if first is None:
            raise SessionNotFoundError(sid)
        self._bumps += 1  # its statement bumped the counter
        return [
            Event(seq=first + i, type=v.type, time=v.time, data=v.data, surface_op=v.surface_op)
            for i, v in enumerate(batch)
        ]

    async def import_session(
        self, header: SessionHeader, events: Sequence[NewEvent] | EventBatches
    ) -> SessionHeader:
        """Create a session with exactly this header and log (seqs from 0), all or nothing.

        A taken id raises ``SessionExistsError``; a bad event ``InvalidEventError``.
        """
        checked = dataclasses.replace(import_header(header), owner=header.owner or self._user)
        batch = [] if isinstance(events, EventBatches) else validate_batch(events)

        async def body(conn: asyncpg.Connection) -> SessionHeader:
            key = await _insert_session(conn, checked, len(batch))
            folder: SurfaceFolder[None] = SurfaceFolder()
            first = len(await _insert_events(conn, key, 0, folder, batch))
            if isinstance(events, EventBatches):  # read off the event loop, one at a time
                while (more := await asyncio.to_thread(events.next_batch)) is not None:
                    first += len(
                        await _insert_events(conn, key, first, folder, validate_batch(more))
                    )
                await conn.execute(
                    "UPDATE dsh_sessions SET next_seq = $1 WHERE key = $2", first, key
                )
            return checked

        return await self._run(body, write=True)

    async def delete_session(self, session_id: str) -> None:
        sid = check_session_id(session_id)

        async def body(conn: asyncpg.Connection) -> None:
            # Members may not DELETE (a table privilege that would let them LOCK the
            # table): the tables' owner's function deletes what the caller owns.
            key, _ = await self._require_own(conn, sid)
            if not await conn.fetchval("SELECT dsh_delete_session($1)", key):
                raise SessionNotFoundError(sid)

        await self._run(body, write=True)


# Reserve the seqs (locking the session row), insert the events and notify, in one
# statement; no row when the session does not exist (then nothing is written). The
# messages' search rows are written by the table's trigger (stores.postgres.team).
_APPEND_PLAIN_SQL = f"""
WITH s AS (
    UPDATE dsh_sessions SET next_seq = next_seq + $2 WHERE {_BY_ID}
    RETURNING key, next_seq - $2 AS first
), ins AS (
    INSERT INTO dsh_events (session_key, seq, type, time, kind, data, surface_op, projection)
    SELECT s.key, s.first + u.n - 1, u.type, u.time, u.kind, u.data, u.op, u.projection
    FROM s, unnest(
        $3::bytea[], $4::bigint[], $5::smallint[], $6::text[], $7::text[], $10::integer[]
    ) WITH ORDINALITY AS u (type, time, kind, data, op, projection, n)
), nodes AS (
    INSERT INTO dsh_surface_nodes (session_key, pos, seq, projection)
    SELECT s.key, s.first + u.n - 1, s.first + u.n - 1, u.projection
    FROM s, unnest($10::integer[]) WITH ORDINALITY AS u (projection, n)
    WHERE u.projection IS NOT NULL
), sums AS (
    INSERT INTO dsh_surface_sums (session_key, messages, bytes)
    SELECT s.key, $11::bigint, $12::bigint FROM s WHERE $11::bigint <> 0
    ON CONFLICT (session_key) DO UPDATE
    SET messages = dsh_surface_sums.messages + excluded.messages,
        bytes = dsh_surface_sums.bytes + excluded.bytes
), notified AS (
    SELECT pg_notify($8, $9), {_BUMP} FROM s
)
SELECT s.first FROM s, notified
"""


async def _insert_session(conn: asyncpg.Connection, header: SessionHeader, next_seq: int) -> int:
    """Insert the session, owned by ``header.owner`` (row security lets a role store only
    its own, unless it is exempt from it, as an admin migrating a whole database is)."""
    try:
        key: int = await conn.fetchval(
            "INSERT INTO dsh_sessions (id, created_at, cwd, next_seq, owner) "
            "VALUES ($1, $2, $3, $4, coalesce($5, current_user)) RETURNING key",
            encode_text(header.id),
            header.created_at,
            None if header.cwd is None else encode_text(header.cwd),
            next_seq,
            header.owner,
        )
    except asyncpg.UniqueViolationError as err:
        if getattr(err, "constraint_name", None) != "dsh_sessions_id":
            raise  # not the id: a StoreError saying what the server said
        raise SessionExistsError(header.id) from err
    except asyncpg.InsufficientPrivilegeError as err:  # row security: another's session
        raise SessionReadOnlyError(header.id, header.owner or "") from err
    return key


def _projection(event: ValidatedEvent) -> int | None:
    """The projection code kept beside a surface event (``None`` for a log event)."""
    if event.surface_op is None:
        return None
    return projection_code(
        build_event(0, event.type, event.time, event.data, event.surface_op, None)
    )


async def _insert_events(
    conn: asyncpg.Connection,
    key: int,
    first: int,
    folder: SurfaceFolder[None],
    batch: Sequence[ValidatedEvent],
) -> list[Event]:
    """Check ``batch`` against ``folder`` (see ``check_batch``), then insert it from seq
    ``first``; the caller's transaction makes it all or nothing."""
    check_batch(folder, first, batch)
    codes = [_projection(v) for v in batch]
    await conn.executemany(
        "INSERT INTO dsh_events (session_key, seq, type, time, kind, data, surface_op, "
        "source_event_seqs, projection) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        [
            (
                key,
                first + i,
                encode_text(v.type),
                v.time,
                event_kind(v.type, v.data, v.surface_op is not None),
                v.data_json,
                None if v.surface_op is None else encode_op(v.surface_op),
                None if v.source_event_seqs is None else encode_seqs(v.source_event_seqs),
                codes[i],
            )
            for i, v in enumerate(batch)
        ],
    )
    await _track_surface(conn, key, first, batch, codes)
    events = [
        Event(
            seq=first + i,
            type=v.type,
            time=v.time,
            data=v.data,
            surface_op=v.surface_op,
            source_event_seqs=v.source_event_seqs,
        )
        for i, v in enumerate(batch)
    ]
    await _index_events(conn, key, events, folder)
    return events
