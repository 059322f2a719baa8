"""The current surface of each session in the SQLite store: ``surface_nodes`` and
``surface_sums`` kept in step by each append (``_track_surface``), backfilled by the
schema v4 upgrade, and the surface reads built on them.
"""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from core.errors import InvalidEventError, StoreError
from core.jsoncodec import loads_exact
from core.log import (
    Event,
    SessionHeader,
    SurfaceOutline,
    SurfaceRow,
    ValidatedEvent,
    build_event,
)
from core.query import MessageTail, TailWalk
from core.references.projection import projection_code
from core.surface import fold_surface
from stores.columns import decode_op, decode_seqs, decode_text
from stores.sqlite.encoding import _text
from stores.sqlite.reads import _Decoding
from stores.sqlite.sql import _EVENT_COLUMNS, _IS_REPLACE
from stores.surfaces import folded_nodes, node_runs
from stores.validation import KIND_SURFACE, check_count, check_session_id

T = TypeVar("T")


_NODE_SEQS_SQL = "SELECT seq FROM surface_nodes WHERE session = ? ORDER BY pos"
"""A session's current surface, seqs in node order (``read_surface_nodes``)."""
_NEWEST_REPLACES_SQL = (
    f"SELECT seq, surface_op FROM events WHERE session = ? AND {_IS_REPLACE} ORDER BY seq DESC"
)
"""A session's replaces, newest first, through ``events_replaces`` (its WHERE implies
the index's, so the planner reads the index backwards; tests/stores assert the plan)."""


def _last_seq(raw: sqlite3.Connection, key: int) -> int | None:
    row = raw.execute(
        "SELECT seq + n - 1 FROM events WHERE session = ? ORDER BY seq DESC LIMIT 1", (key,)
    ).fetchone()
    return None if row is None else int(row[0])


def _outline_rows(raw: sqlite3.Connection, key: int, rows: Iterable[Any]) -> list[SurfaceOutline]:
    """Decode ``(seq, surface_op, source_event_seqs, projection)`` rows of ``events``; a
    projection written as NULL (rows from before schema v3 kept it) is computed from the
    event's data. Corrupt data raises ``ValueError``, ``TypeError`` or ``zlib.error``."""
    out: list[SurfaceOutline] = []
    for seq, surface_op, source_seqs, projection in rows:
        op = decode_op(surface_op)
        seqs = None if source_seqs is None else decode_seqs(source_seqs)
        if projection is None:  # written before projections were kept
            raw_type, time, data = raw.execute(
                # (a row without a projection is older than linked rows: its data is
                # plain, and this runs in the v4 upgrade, before search_messages exists)
                "SELECT type, time, data FROM events WHERE session = ? AND seq = ?",
                (key, seq),
            ).fetchone()
            event = build_event(
                seq, decode_text(raw_type), time, loads_exact(_text(data)), op, seqs
            )
            projection = projection_code(event)
        out.append(SurfaceOutline(seq, op, seqs, projection))
    return out


_INSERT_NODE_SQL = "INSERT INTO surface_nodes (session, pos, seq, projection) VALUES (?, ?, ?, ?)"


def _track_surface(
    raw: sqlite3.Connection,
    key: int,
    first: int,
    batch: Sequence[ValidatedEvent],
    codes: dict[int, int],
) -> None:
    """Keep ``surface_nodes`` and ``surface_sums`` in step with a batch whose surface
    operations were checked (so every replace's range is on the surface); ``codes``: the
    projection code of each surface event, by its index in the batch (in order): the runs
    of nodes it adds (``stores.surfaces.node_runs``), each written after the nodes its
    replace shadows went."""
    runs, sums = node_runs(
        first,
        [
            (offset, op, code)
            for offset, code in codes.items()
            if (op := batch[offset].surface_op) is not None
        ],
    )
    for run in runs:
        lo = None
        op = run.replace
        if op is not None:
            ends = raw.execute(
                "SELECT pos FROM surface_nodes WHERE session = ? AND seq IN (?, ?) ORDER BY pos",
                (key, op.start, op.end),
            ).fetchall()
            if not ends:
                raise StoreError(f"the surface index lacks seqs {op.start}..{op.end}")
            lo, hi = ends[0][0], ends[-1][0]
            for (gone,) in raw.execute(
                "SELECT projection FROM surface_nodes WHERE session = ? AND pos BETWEEN ? AND ?",
                (key, lo, hi),
            ).fetchall():
                sums.remove(gone)
            raw.execute(
                "DELETE FROM surface_nodes WHERE session = ? AND pos BETWEEN ? AND ?",
                (key, lo, hi),
            )
        raw.executemany(_INSERT_NODE_SQL, run.rows(key, lo))
    if sums.messages or sums.bytes:
        raw.execute(
            "INSERT INTO surface_sums (session, messages, bytes) VALUES (?, ?, ?) "
            "ON CONFLICT (session) DO UPDATE SET messages = messages + excluded.messages, "
            "bytes = bytes + excluded.bytes",
            (key, sums.messages, sums.bytes),
        )


_BACKFILL_REPORT_MIN = 100_000
"""An upgrade folding at least this many surface rows reports its progress."""
_BACKFILL_BATCH = 50_000


def _backfill_surfaces(
    raw: sqlite3.Connection,
    progress: Callable[[int, int], None] | None,
    only: Sequence[int] | None = None,
) -> None:
    """Migration to schema v4: fold every session's surface once into ``surface_nodes``
    and ``surface_sums`` (positions: the node's rank, below every later seq). ``only``:
    these sessions alone (their nodes and sums gone first; schema v10)."""
    (total,) = raw.execute(f"SELECT count(*) FROM events WHERE kind = {KIND_SURFACE}").fetchone()
    report = progress if progress is not None and total >= _BACKFILL_REPORT_MIN else None
    if only is not None:
        report = None
    done = 0
    keys = [key for (key,) in raw.execute("SELECT key FROM sessions ORDER BY key").fetchall()]
    if only is not None:
        keys = list(only)
    for key in keys:
        cursor = raw.execute(
            "SELECT seq, surface_op, source_event_seqs, projection FROM events "
            f"WHERE session = ? AND kind = {KIND_SURFACE} ORDER BY seq",
            (key,),
        )
        outline: list[SurfaceOutline] = []
        while rows := cursor.fetchmany(_BACKFILL_BATCH):
            try:
                outline += _outline_rows(raw, key, rows)
            except (ValueError, TypeError, zlib.error) as err:
                raise StoreError(f"cannot upgrade: a stored event is corrupt ({err})") from err
            done += len(rows)
            if report is not None:
                report(done, total)
        try:
            nodes = fold_surface(outline)
        except InvalidEventError as err:
            raise StoreError(f"cannot upgrade: a stored surface is invalid ({err})") from err
        rows, sums = folded_nodes(key, nodes)
        raw.executemany(_INSERT_NODE_SQL, rows)
        if sums.messages:
            raw.execute(
                "INSERT INTO surface_sums (session, messages, bytes) VALUES (?, ?, ?)",
                (key, sums.messages, sums.bytes),
            )
    if report is not None and done < total:
        report(total, total)


class _SurfacesMixin(_Decoding):
    """Reading a session's surface: its rows, nodes, outline, tail and message tail."""

    async def last_surface_seq(self, session_id: str) -> int | None:
        sid = check_session_id(session_id)

        def body(raw: sqlite3.Connection) -> int | None:
            key, _ = self._session(raw, sid)
            (last,) = raw.execute(
                f"SELECT max(seq) FROM events WHERE session = ? AND kind = {KIND_SURFACE}",
                (key,),
            ).fetchone()
            return None if last is None else int(last)

        return await self._run_sync(body, write=False)

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

        def body(raw: sqlite3.Connection) -> tuple[SessionHeader, int | None, tuple[int, ...], int]:
            key, header = self._session(raw, sid)
            last = _last_seq(raw, key)
            # One range of surface_nodes' primary key (the table itself: WITHOUT ROWID),
            # already in node order: no event row is read and nothing is folded.
            rows = raw.execute(_NODE_SEQS_SQL, (key,)).fetchall()
            return header, last, tuple([seq for (seq,) in rows]), self._newest_replace(raw, key)

        return await self._run_sync(body, write=False)

    def _newest_replace(self, raw: sqlite3.Connection, key: int) -> int:
        """The seq of the session's newest replace, ``-1`` without one: the last entry of
        ``events_replaces`` (its op decoded, so a stored op that does not decode is a
        ``StoreError`` here as in a fold)."""
        cursor = raw.execute(_NEWEST_REPLACES_SQL, (key,))
        try:
            for seq, op in cursor:
                if decode_op(op) != "append":
                    return int(seq)
            return -1
        except (ValueError, TypeError) as err:
            raise StoreError(f"{self._path}: a stored event is corrupt ({err})") from err
        finally:
            cursor.close()

    async def read_surface_tail(
        self, session_id: str, count: int
    ) -> tuple[SessionHeader, int | None, list[SurfaceRow]]:
        sid = check_session_id(session_id)
        limit = check_count(count)

        def body(raw: sqlite3.Connection) -> tuple[SessionHeader, int | None, list[SurfaceRow]]:
            key, header = self._session(raw, sid)
            rows = raw.execute(
                "SELECT seq, surface_op, source_event_seqs FROM events "
                f"WHERE session = ? AND kind = {KIND_SURFACE} ORDER BY seq DESC LIMIT ?",
                (key, limit),
            ).fetchall()
            rows.reverse()
            return header, _last_seq(raw, key), self._decode_surface_rows(rows)

        return await self._run_sync(body, write=False)

    async def read_surface_outline(
        self, session_id: str
    ) -> tuple[SessionHeader, int | None, list[SurfaceOutline]]:
        sid = check_session_id(session_id)

        def body(raw: sqlite3.Connection) -> tuple[SessionHeader, int | None, list[SurfaceOutline]]:
            key, header = self._session(raw, sid)
            last = _last_seq(raw, key)
            # The primary key's walk, reading each surface row for these columns.
            rows = raw.execute(
                "SELECT seq, surface_op, source_event_seqs, projection FROM events "
                f"WHERE session = ? AND kind = {KIND_SURFACE} ORDER BY seq",
                (key,),
            ).fetchall()
            return header, last, self._decode_outline(raw, key, rows)

        return await self._run_sync(body, write=False)

    def _decode_outline(
        self, raw: sqlite3.Connection, key: int, rows: list[Any]
    ) -> list[SurfaceOutline]:
        try:
            return _outline_rows(raw, key, rows)
        except (ValueError, TypeError, zlib.error) as err:
            raise StoreError(f"{self._path}: a stored event is corrupt ({err})") from err

    async def read_message_tail(
        self, session_id: str, budget: int
    ) -> tuple[SessionHeader, int | None, MessageTail]:
        sid = check_session_id(session_id)
        limit = check_count(budget)

        def body(raw: sqlite3.Connection) -> tuple[SessionHeader, int | None, MessageTail]:
            key, header = self._session(raw, sid)
            last = _last_seq(raw, key)
            walk = TailWalk(limit)
            # Newest first along surface_messages; stops once the budget is spent.
            cursor = raw.execute(
                "SELECT pos, seq, projection FROM surface_nodes "
                "WHERE session = ? AND projection >= 0 ORDER BY pos DESC",
                (key,),
            )
            for pos, seq, code in cursor:
                if walk.take(pos, seq, code):
                    break
            cursor.close()
            if not walk.exceeded:
                return header, last, walk.tail()
            checkpoints = raw.execute(
                "SELECT seq, projection FROM surface_nodes WHERE session = ? "
                "AND projection >= 0 AND (projection & 2) = 2 AND pos < ? ORDER BY pos",
                (key, walk.start),
            ).fetchall()
            row = raw.execute(
                "SELECT messages, bytes FROM surface_sums WHERE session = ?", (key,)
            ).fetchone()
            messages, size = (0, 0) if row is None else row
            return header, last, walk.tail(checkpoints, messages, size)

        return await self._run_sync(body, write=False)

    async def _read_surface(
        self, session_id: str, columns: str, decode: Callable[[list[Any]], list[T]]
    ) -> tuple[SessionHeader, int | None, list[T]]:
        """Header, last raw seq and the surface rows (``columns``) in one read transaction;
        the rows are decoded off the event loop."""
        sid = check_session_id(session_id)

        def body(raw: sqlite3.Connection) -> tuple[SessionHeader, int | None, list[T]]:
            key, header = self._session(raw, sid)
            last = _last_seq(raw, key)
            rows = raw.execute(
                f"SELECT {columns} FROM events WHERE session = ? AND kind = {KIND_SURFACE} "
                "ORDER BY seq",
                (key,),
            ).fetchall()
            return header, last, decode(rows)

        return await self._run_sync(body, write=False)
