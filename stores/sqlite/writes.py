"""Writing to the SQLite store: sessions inserted, and a batch of events inserted in
its append's transaction (``_insert_events``: packed runs, linked replies, the surface
and the search index kept in step).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import stores.sqlite.search as search  # its SEARCH_INDEX is read at each append
from core.batches import EventBatches
from core.errors import SessionExistsError, SessionNotFoundError, StoreError
from core.log import (
    ASSISTANT_MESSAGE,
    SESSION_TITLE,
    Event,
    NewEvent,
    SessionHeader,
    ValidatedEvent,
    build_events,
)
from core.references.projection import projection_code
from core.search import indexed_text
from core.surface import SurfaceFolder
from stores.appends import ValidatedAppends
from stores.columns import encode_op, encode_seqs, encode_text
from stores.sharing import check_owner
from stores.sqlite.drafts import (
    _fill_draft,
    _link_runs,
    _open_draft,
    _PackDraft,
    _reply_packs,
    _with_blob,
)
from stores.sqlite.encoding import _stored_data, _stored_message
from stores.sqlite.packs import (
    _PACK_EVENT_MAX,
    _PACK_MAX_BYTES,
    _PACK_MAX_EVENTS,
    _add_lines,
    _DamagedPack,
)
from stores.sqlite.search import _index_events
from stores.sqlite.sharing import _Access
from stores.sqlite.sql import KIND_PACK
from stores.sqlite.surfaces import _track_surface
from stores.surfaces import fold_stored
from stores.validation import (
    KIND_LOG,
    KIND_SURFACE,
    MARK_TYPES,
    batch_has_replace,
    check_batch,
    check_session_id,
    event_kind,
    import_header,
    new_header,
    validate_batch,
)

if TYPE_CHECKING:
    import aiosqlite

_INSERT_SESSION_SQL = "INSERT INTO sessions (id, created_at, cwd, owner) VALUES (?, ?, ?, ?)"


def _session_params(header: SessionHeader) -> tuple[bytes, int | None, bytes | None, str | None]:
    return (
        encode_text(header.id),
        header.created_at,
        None if header.cwd is None else encode_text(header.cwd),
        header.owner,
    )


async def _insert_session(conn: aiosqlite.Connection, header: SessionHeader) -> None:
    try:
        await conn.execute(_INSERT_SESSION_SQL, _session_params(header))
    except sqlite3.IntegrityError as err:
        raise SessionExistsError(header.id) from err


def _insert_session_sync(raw: sqlite3.Connection, header: SessionHeader) -> int:
    """Insert the session; its new key."""
    try:
        cursor = raw.execute(_INSERT_SESSION_SQL, _session_params(header))
    except sqlite3.IntegrityError as err:
        raise SessionExistsError(header.id) from err
    key = cursor.lastrowid
    assert key is not None
    return key


_APPEND_HEAD_SQL = (
    "SELECT s.key, e.seq, e.n, e.kind, CASE WHEN e.kind = 3 THEN e.data END "
    "FROM sessions AS s LEFT JOIN events AS e ON e.session = s.key "
    "AND e.seq = (SELECT max(seq) FROM events WHERE session = s.key) WHERE s.id = ?"
)
"""A session's key and its last row (seq, n, kind, and its data when it is a pack)."""

_INSERT_EVENT_SQL = (
    "INSERT INTO events (session, seq, n, type, time, kind, data, surface_op, "
    "source_event_seqs, projection) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _insert_events(
    raw: sqlite3.Connection,
    key: int,
    first: int,
    folder: SurfaceFolder[None],
    batch: Sequence[ValidatedEvent],
    open_pack: tuple[int, int, bytes] | None,
) -> list[Event]:
    """Check ``batch`` against ``folder`` (see ``check_batch``), then insert it from seq
    ``first``; the caller's transaction makes it all or nothing.

    Consecutive packable events (log-only, small, neither a title nor a session mark:
    ``events_title`` and ``events_marks`` index single rows) are stored as packs; a run
    that starts the batch first fills ``open_pack`` (the session's last row, ``(seq, n,
    blob)``, when it is a pack ending right before ``first``), which is rewritten in
    place.
    """
    check_batch(folder, first, batch)
    events = build_events(first, list(batch))
    title = SESSION_TITLE
    kinds = [
        KIND_LOG
        if v.surface_op is None and v.type != title
        else event_kind(v.type, v.data, v.surface_op is not None)
        for v in batch
    ]
    # The projection code of each surface event, by its index in the batch.
    codes = {i: projection_code(events[i]) for i, v in enumerate(batch) if v.surface_op is not None}
    # The text each surface event's search row holds (the rows link to it), by index.
    texts = {i: indexed_text(events[i]) for i in codes} if search.SEARCH_INDEX else {}
    pack_max = _PACK_EVENT_MAX
    marks = MARK_TYPES  # each in a row of its own (``events_marks``)
    packable = [
        kind == KIND_LOG and len(v.data_json) <= pack_max and v.type not in marks
        for kind, v in zip(kinds, batch, strict=True)
    ]
    rows: list[tuple[Any, ...]] = []
    drafts: list[_PackDraft] = []  # the packs this batch writes
    opened: _PackDraft | None = None  # the open pack, when read
    extended = False  # whether this batch added events to it
    i, count = 0, len(batch)
    while i < count:
        v = batch[i]
        if not packable[i]:
            rows.append(
                (
                    key,
                    first + i,
                    1,
                    encode_text(v.type),
                    v.time,
                    kinds[i],
                    _stored_message(
                        v.data_json, texts.get(i) if kinds[i] == KIND_SURFACE else None
                    ),
                    None if v.surface_op is None else encode_op(v.surface_op),
                    None if v.source_event_seqs is None else encode_seqs(v.source_event_seqs),
                    codes.get(i),
                )
            )
            i += 1
            continue
        end = i + 1
        while end < count and packable[end]:
            end += 1
        if i == 0 and open_pack is not None and open_pack[1] < _PACK_MAX_EVENTS:
            opened = _open_draft(open_pack, first)
            if opened is not None:
                i = _fill_draft(opened, batch, end)
                extended = i > 0
        while i < end:
            stop, size = i, 0
            while stop < end and stop - i < _PACK_MAX_EVENTS:
                size += len(batch[stop].data_json) + 1
                if size > _PACK_MAX_BYTES and stop > i:
                    break
                stop += 1
            run = batch[i:stop]
            if len(run) == 1:
                rows.append(
                    (
                        key,
                        first + i,
                        1,
                        encode_text(run[0].type),
                        run[0].time,
                        KIND_LOG,
                        _stored_data(run[0].data_json),
                        None,
                        None,
                        None,
                    )
                )
            else:
                draft = _PackDraft(first + i, [e.type for e in run], [e.time for e in run])
                _add_lines(draft.lines, draft.runs, [e.data_json for e in run])
                drafts.append(draft)
                rows.append(
                    (
                        key,
                        first + i,
                        len(run),
                        encode_text(run[0].type),
                        run[-1].time,
                        KIND_PACK,
                        draft,  # its blob once the batch's messages are linked
                        None,
                        None,
                        None,
                    )
                )
            i = stop
    replies = [
        (first + j, v.data)
        for j, v in enumerate(batch)
        if v.type == ASSISTANT_MESSAGE and v.surface_op == "append"
    ]
    stored: dict[int, _PackDraft | None] = {}  # the stored packs before the open one read
    if replies:
        if opened is None and open_pack is not None:
            with contextlib.suppress(_DamagedPack):  # left as it is: reads name the damage
                opened = _open_draft(open_pack, first)
        for reply in replies:
            _link_runs(_reply_packs(raw, key, rows, opened, stored, *reply), [reply])
    if opened is not None and (extended or opened.linked):
        raw.execute(
            "UPDATE events SET n = ?, time = ?, data = ? WHERE session = ? AND seq = ?",
            (len(opened.types), opened.times[-1], opened.blob(), key, opened.first),
        )
    for earlier in stored.values():
        if earlier is not None and earlier.linked:
            raw.execute(
                "UPDATE events SET data = ? WHERE session = ? AND seq = ?",
                (earlier.blob(), key, earlier.first),
            )
    if drafts:
        rows = [row if row[6].__class__ is not _PackDraft else _with_blob(row) for row in rows]
    raw.executemany(_INSERT_EVENT_SQL, rows)
    _track_surface(raw, key, first, batch, codes)
    _index_events(raw, key, events, folder, texts)
    return events


class _WritesMixin(ValidatedAppends, _Access):
    """Creating, appending to, importing and deleting sessions."""

    async def create_session(
        self,
        session_id: str | None = None,
        *,
        cwd: str | None = None,
        created_at: int | None = None,
    ) -> SessionHeader:
        header = replace(new_header(session_id, cwd, created_at), owner=self._user)

        async def body(conn: aiosqlite.Connection) -> SessionHeader:
            await _insert_session(conn, header)
            return header

        return await self._run(body, write=True)

    async def _append(self, session_id: str, batch: list[ValidatedEvent]) -> list[Event]:
        def body(raw: sqlite3.Connection) -> list[Event]:
            self._own(raw, session_id)
            row = raw.execute(_APPEND_HEAD_SQL, (encode_text(session_id),)).fetchone()
            if row is None:
                raise SessionNotFoundError(session_id)
            key, last_seq, last_n, last_kind, last_data = row
            if not batch:
                return []
            first = 0 if last_seq is None else last_seq + last_n
            folder: SurfaceFolder[None] = SurfaceFolder()
            if batch_has_replace(batch):
                surface = raw.execute(
                    "SELECT seq, surface_op, source_event_seqs FROM events "
                    f"WHERE session = ? AND kind = {KIND_SURFACE} ORDER BY seq",
                    (key,),
                )
                folder = fold_stored(surface)
            open_pack = (last_seq, last_n, last_data) if last_kind == KIND_PACK else None
            try:
                return _insert_events(raw, key, first, folder, batch, open_pack)
            except _DamagedPack as err:
                raise StoreError(f"{self._path}: a stored event is corrupt ({err})") from err

        return await self._run_sync(body, write=True)

    async def import_session(
        self, header: SessionHeader, events: Sequence[NewEvent] | EventBatches
    ) -> SessionHeader:
        """Create a session with exactly this header and log (seqs from 0), all or nothing.

        A taken id raises ``SessionExistsError``; a bad event ``InvalidEventError``.
        """
        checked = replace(import_header(header), owner=header.owner or self._user)
        batch = [] if isinstance(events, EventBatches) else validate_batch(events)

        def body(raw: sqlite3.Connection) -> SessionHeader:
            key = _insert_session_sync(raw, checked)
            folder: SurfaceFolder[None] = SurfaceFolder()
            first = len(_insert_events(raw, key, 0, folder, batch, None))
            # More batches (read on this thread, the store's, not the event loop's),
            # each continuing the last pack as an append would.
            while isinstance(events, EventBatches) and (more := events.next_batch()) is not None:
                row = raw.execute(_APPEND_HEAD_SQL, (encode_text(checked.id),)).fetchone()
                open_pack = (row[1], row[2], row[4]) if row[3] == KIND_PACK else None
                first += len(
                    _insert_events(raw, key, first, folder, validate_batch(more), open_pack)
                )
            return checked

        return await self._run_sync(body, write=True)

    async def delete_session(self, session_id: str) -> None:
        sid = check_session_id(session_id)

        async def body(conn: aiosqlite.Connection) -> None:
            header = await self._require_session(conn, sid)
            check_owner(sid, header.owner, self._user)
            cursor = await conn.execute("DELETE FROM sessions WHERE id = ?", (encode_text(sid),))
            if cursor.rowcount == 0:
                raise SessionNotFoundError(sid)

        await self._run(body, write=True)
