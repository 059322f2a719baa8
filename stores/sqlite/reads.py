"""Reading events from the SQLite store: rows decoded into events (single rows and
packs), a whole log, events and bodies by seq, the unknown events.
"""

from __future__ import annotations

import sqlite3
import zlib
from bisect import bisect_left
from collections.abc import Container, Sequence
from pathlib import Path
from typing import Any

from core.errors import StoreError
from core.gcpause import gc_paused
from core.jsoncodec import loads_exact
from core.log import (
    KNOWN_EVENT_TYPES,
    Event,
    SessionHeader,
    SurfaceOp,
    SurfaceRow,
    build_event,
    is_known_event_type,
)
from stores.columns import (
    APPEND_JSON,
    decode_op,
    decode_seqs,
    decode_surface_rows,
    decode_text,
    encode_text,
)
from stores.sqlite.encoding import _text
from stores.sqlite.packs import _pack_parts, _pack_types, _ReplyTexts, _unpack_events
from stores.sqlite.sharing import _Access, _readable
from stores.sqlite.sql import _DATA, _EVENT_COLUMNS, _SEQS_PER_QUERY, KIND_PACK, _data_sql
from stores.validation import (
    KIND_LOG,
    check_seq_range,
    check_seqs,
    check_session_id,
    missing_seq_error,
)

# ``read_events_at`` reads the whole range of rows between the first and the last seq
# wanted when it spans at most twice as many seqs as are wanted, plus this.
_SPAN_SLACK = 16
# Its parameters: the session id, the two of ``_readable``, the last seq, the first.
_SPAN_SQL = (
    f"WITH k AS (SELECT key FROM sessions AS s WHERE id = ? AND {_readable('s')}) "
    f"SELECT e.seq, e.n, e.type, e.time, e.kind, {_data_sql('e')}, e.surface_op, "
    "e.source_event_seqs FROM k, events AS e "
    "WHERE e.session = k.key AND e.seq <= ? AND e.seq >= coalesce((SELECT f.seq FROM "
    "events AS f WHERE f.session = k.key AND f.seq <= ? ORDER BY f.seq DESC LIMIT 1), 0) "
    "ORDER BY e.seq"
)

_INT64_MAX = 2**63 - 1


def _rows_at(raw: sqlite3.Connection, key: int, seqs: list[int], columns: str) -> list[Any]:
    """The rows holding the session's events with these seqs (sorted, distinct), each row
    once: looked up by seq, then the pack covering each seq left (one lookup per pack).
    ``columns`` (SQL) begin with ``seq, n``; a seq that does not exist has no row."""
    rows: list[Any] = []
    for start in range(0, len(seqs), _SEQS_PER_QUERY):
        chunk = seqs[start : start + _SEQS_PER_QUERY]
        rows += raw.execute(
            f"SELECT {columns} FROM events WHERE session = ? "
            f"AND seq IN ({', '.join('?' * len(chunk))})",
            (key, *chunk),
        ).fetchall()
    found = {row[0] for row in rows}
    # The rest are inside packs: fetch each covering pack once.
    covered = -1
    for seq in seqs:
        if seq in found or seq <= covered:
            continue
        row = raw.execute(
            f"SELECT {columns} FROM events WHERE session = ? AND seq <= ? "
            "ORDER BY seq DESC LIMIT 1",
            (key, seq),
        ).fetchone()
        if row is None or row[0] in found:
            continue
        found.add(row[0])
        covered = row[0] + row[1] - 1
        if covered >= seq:
            rows.append(row)
    return rows


def _bodies_at(
    raw: sqlite3.Connection, key: int, seqs: list[int], path: Path
) -> dict[int, tuple[str, Any]]:
    """``read_bodies_at``'s read: the ``(type, data)`` of the session's events with these
    seqs (sorted, distinct) that exist, by seq; the source seqs are never read."""
    out: dict[int, tuple[str, Any]] = {}
    types: dict[bytes, str] = {}
    wanted = set(seqs)
    replies = _ReplyTexts.of(raw, key)
    try:
        for seq, n, raw_type, kind, data in _rows_at(
            raw, key, seqs, f"seq, n, type, kind, {_DATA}"
        ):
            if kind == KIND_PACK:
                for event in _unpack_events(seq, n, data, wanted, replies):
                    out[event.seq] = (event.type, event.data)
                continue
            type_ = types.get(raw_type)
            if type_ is None:
                type_ = types[raw_type] = decode_text(raw_type)
            out[seq] = (type_, loads_exact(_text(data)))
    except (ValueError, TypeError, zlib.error) as err:
        raise StoreError(f"{path}: a stored event is corrupt ({err})") from err
    return out


class _Decoding(_Access):
    """Stored rows decoded into events and surface rows."""

    def _decode_events(
        self,
        rows: list[Any],
        wanted: Container[int] | None = None,
        replies: _ReplyTexts | None = None,
    ) -> list[Event]:
        """Decode ``rows``, releasing each raw row as soon as its event exists (so the raw
        text and the decoded events of a large session are not both held in full).

        The hot loop of every large read: a handful of distinct types are decoded once,
        and an append (nearly every surface event) skips the op parser."""
        out: list[Event] = []
        append = out.append
        types: dict[bytes, str] = {}
        loads = loads_exact
        build = build_event
        if replies is not None:
            replies.hold(rows)
        try:
            for i, (seq, n, raw_type, time, kind, data, surface_op, source_seqs) in enumerate(rows):
                if kind == KIND_PACK:
                    out += _unpack_events(seq, n, data, wanted, replies)
                    rows[i] = None
                    continue
                value = None if replies is None else replies.value(seq, data)
                if value is None:
                    value = loads(data if data.__class__ is str else _text(data))
                type_ = types.get(raw_type)
                if type_ is None:
                    type_ = types[raw_type] = decode_text(raw_type)
                if surface_op is None:
                    op: SurfaceOp | None = None
                elif surface_op == APPEND_JSON:
                    op = "append"
                else:
                    op = decode_op(surface_op)
                seqs = None if source_seqs is None else decode_seqs(source_seqs)
                append(build(seq, type_, time, value, op, seqs))
                rows[i] = None
        except (ValueError, TypeError, zlib.error) as err:
            raise StoreError(f"{self._path}: a stored event is corrupt ({err})") from err
        return out

    def _decode_surface_rows(self, rows: list[Any]) -> list[SurfaceRow]:
        return decode_surface_rows(rows, self._path)


class _ReadsMixin(_Decoding):
    """Reading a session's header and events: all of them, some by seq, the unknown ones."""

    async def read_header(self, session_id: str) -> SessionHeader:
        sid = check_session_id(session_id)

        def body(raw: sqlite3.Connection) -> SessionHeader:
            return self._session(raw, sid)[1]

        # One statement, one hand-over to the connection's thread (``dsh import`` asks
        # before each log: a third of its time per small session was this call's).
        return await self._run_sync(body, write=False, begin=False)

    async def read_events(self, session_id: str) -> list[Event]:
        sid = check_session_id(session_id)

        def body(raw: sqlite3.Connection) -> list[Event]:
            key, _ = self._session(raw, sid)
            rows = raw.execute(
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE session = ? ORDER BY seq", (key,)
            ).fetchall()
            # Decoded on the connection's thread: off the event loop; the events are
            # acyclic, so the cyclic collector's passes over them would be pure overhead.
            with gc_paused():
                return self._decode_events(rows, None, _ReplyTexts.of(raw, key))

        return await self._run_sync(body, write=False)

    async def read_events_at(self, session_id: str, seqs: Sequence[int]) -> list[Event]:
        sid = check_session_id(session_id)
        wanted = check_seqs(seqs)

        wanted_set = set(wanted)

        def body(raw: sqlite3.Connection) -> list[Event]:
            distinct = sorted(wanted_set)
            if distinct and distinct[-1] - distinct[0] <= 2 * len(distinct) + _SPAN_SLACK:
                # Dense (the last events of a log, a page of them): one statement (its
                # own transaction) reads the range of rows from the one covering the
                # first seq wanted, keeping those that hold one; not a lookup per seq
                # and another per covering pack.
                span = raw.execute(
                    _SPAN_SQL, (encode_text(sid), *self._readers, distinct[-1], distinct[0])
                ).fetchall()
                if not span:
                    self._session(raw, sid)  # SessionNotFoundError when it is that
                count = len(distinct)
                rows: list[Any] = []
                for row in span:
                    at = bisect_left(distinct, row[0])
                    if at < count and distinct[at] < row[0] + row[1]:
                        rows.append(row)
                return self._decode_events(rows, wanted_set, self._replies_by_id(raw, sid))
            raw.execute("BEGIN")
            key, _ = self._session(raw, sid)
            return self._decode_events(
                _rows_at(raw, key, distinct, _EVENT_COLUMNS), wanted_set, _ReplyTexts.of(raw, key)
            )

        by_seq = {
            event.seq: event for event in await self._run_sync(body, write=False, begin=False)
        }
        for seq in wanted:
            if seq not in by_seq:
                raise missing_seq_error(sid, seq)
        return [by_seq[seq] for seq in wanted]

    def _replies_by_id(self, raw: sqlite3.Connection, session_id: str) -> _ReplyTexts:
        """``_ReplyTexts`` of a session known by its id (a read outside a transaction:
        when the session was deleted meanwhile, that is ``SessionNotFoundError``)."""
        sql = (
            f"SELECT e.kind, e.type, {_data_sql('e')} FROM sessions AS s JOIN events AS e "
            f"ON e.session = s.key WHERE s.id = ? AND {_readable('s')} AND e.seq = ?"
        )
        params = (encode_text(session_id), *self._readers)
        return _ReplyTexts(
            lambda seq: raw.execute(sql, (*params, seq)).fetchone(),
            lambda: self._session(raw, session_id),
        )

    async def read_bodies_at(self, session_id: str, seqs: Sequence[int]) -> list[tuple[str, Any]]:
        sid = check_session_id(session_id)
        wanted = check_seqs(seqs)
        wanted_set = set(wanted)

        def body(raw: sqlite3.Connection) -> dict[int, tuple[str, Any]]:
            key, _ = self._session(raw, sid)
            return _bodies_at(raw, key, sorted(wanted_set), self._path)

        found = await self._run_sync(body, write=False)
        for seq in wanted:
            if seq not in found:
                raise missing_seq_error(sid, seq)
        return [found[seq] for seq in wanted]

    async def read_unknown_events(
        self, session_id: str, after: int = -1, through: int | None = None
    ) -> list[Event]:
        sid = check_session_id(session_id)
        low, high = check_seq_range(after, through)
        top = _INT64_MAX if high is None else high
        known = sorted(encode_text(t) for t in KNOWN_EVENT_TYPES)

        def body(raw: sqlite3.Connection) -> list[Event]:
            key, _ = self._session(raw, sid)
            if top <= low:
                return []
            # Single log rows of an unknown type, and every pack (a pack may hold any
            # small log event): one range of the primary key, plus the pack that may
            # start at or before ``after`` and reach into the range.
            rows = raw.execute(
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE session = ? AND seq > ? "
                f"AND seq <= ? AND (kind = {KIND_PACK} OR (kind = {KIND_LOG} "
                f"AND type NOT IN ({', '.join('?' * len(known))}))) ORDER BY seq",
                (key, low, top, *known),
            ).fetchall()
            if low >= 0:
                before = raw.execute(
                    f"SELECT {_EVENT_COLUMNS} FROM events WHERE session = ? AND seq <= ? "
                    "ORDER BY seq DESC LIMIT 1",
                    (key, low),
                ).fetchone()
                if before is not None and before[4] == KIND_PACK and before[0] + before[1] > low:
                    rows.insert(0, before)
            out: list[Event] = []
            singles: list[Any] = []
            try:
                for row in rows:
                    if row[4] != KIND_PACK:
                        singles.append(row)
                        continue
                    first, n, blob = row[0], row[1], row[5]
                    if all(is_known_event_type(t) for t in _pack_types(blob)):
                        continue  # the usual pack: streamed chunks, turn ends
                    types = _pack_parts(blob)[0]
                    wanted = {
                        first + i
                        for i, type_ in enumerate(types)
                        if low < first + i <= top and not is_known_event_type(type_)
                    }
                    if wanted:
                        out += _unpack_events(first, n, blob, wanted, _ReplyTexts.of(raw, key))
            except (ValueError, TypeError, zlib.error) as err:
                raise StoreError(f"{self._path}: a stored event is corrupt ({err})") from err
            out += self._decode_events(singles)
            out.sort(key=lambda event: event.seq)
            return out

        return await self._run_sync(body, write=False)
