"""Listings over every session of the SQLite store: headers, titles, the latest mark of
each session and the last event times, with their SQL and their memos.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from core.damage import DamagedRow
from core.errors import StoreError
from core.log import Event, SessionHeader
from core.query import SessionTitle
from stores.columns import decode_text, encode_text
from stores.sqlite.connection import _scalar
from stores.sqlite.encoding import _title_text
from stores.sqlite.reads import _Decoding
from stores.sqlite.sharing import _readable
from stores.sqlite.sql import _blob
from stores.validation import KIND_LOG, KIND_TITLE, check_mark_type, check_session_ids, stored_title

if TYPE_CHECKING:
    import aiosqlite

_T = TypeVar("_T")

# Ids per statement in ``read_titles`` (well under SQLITE_MAX_VARIABLE_NUMBER).
_IN_CHUNK = 500


# Entries per decoded-row memo; past it the memo starts over (it is only a cache).
_MEMO_LIMIT = 250_000


async def _to_thread(function: Callable[..., _T], *args: Any) -> _T:
    """``asyncio.to_thread`` (asyncio loads with the async store, never for a one-shot
    read: ``stores.sqlite.oneshot``)."""
    import asyncio

    return await asyncio.to_thread(function, *args)


def _trim(memo: dict[Any, Any]) -> None:
    if len(memo) > _MEMO_LIMIT:
        memo.clear()


def titles_sql(where: str = "") -> str:
    """The latest title event of each session (``where`` narrows the sessions).

    The highest title seq per session comes from the partial index ``events_title``
    alone, and, as the only aggregate is ``max()``, SQLite takes the bare ``rowid`` from
    that same row: each title row is then one rowid lookup (joining on
    ``(session_id, seq)`` instead costs a second index search per session, ~1.7x).
    """
    return (
        "SELECT s.id, e.seq, e.time, e.data FROM ("
        f"SELECT max(seq), rowid AS r FROM events WHERE kind = {KIND_TITLE}{where} "
        "GROUP BY session) AS t "
        "JOIN events AS e ON e.rowid = t.r JOIN sessions AS s ON s.key = e.session"
    )


def latest_events_sql(type_: str, where: str = "") -> str:
    """The latest event of type ``type_`` (one of ``MARK_TYPES``) of each session, as the
    session's id and its row's ``_EVENT_COLUMNS`` (``where`` narrows the sessions), as
    ``titles_sql`` reads titles: the highest seq per session from the partial index
    ``events_marks`` alone (its WHERE is implied by this one's, ``_IS_MARK``), then one
    rowid lookup per session. Such an event is never packed: its row is a single one."""
    return (
        "SELECT s.id, e.seq, e.n, e.type, e.time, e.kind, e.data, e.surface_op, "
        "e.source_event_seqs FROM ("
        f"SELECT max(seq), rowid AS r FROM events WHERE kind = {KIND_LOG} "
        f"AND type = {_blob(type_)}{where} GROUP BY session) AS t "
        "JOIN events AS e ON e.rowid = t.r JOIN sessions AS s ON s.key = e.session"
    )


LAST_EVENT_TIMES_SQL = (
    "SELECT s.id, (SELECT e.time FROM events AS e WHERE e.session = s.key "
    "ORDER BY e.seq DESC LIMIT 1) FROM sessions AS s"
)
"""The ``time`` of each session's last event (``NULL`` without events): per session, one descending seek in the
primary-key index ``(session, seq)`` (a pack's ``time`` is its last event's), so the cost grows with the number of sessions,
not of events (a ``GROUP BY`` over ``events`` would read every event's index entry)."""


HEADERS_SQL = (
    f"SELECT id, created_at, cwd, owner FROM sessions AS s WHERE {_readable('s')} "
    "ORDER BY created_at DESC, id"
)
"""Every session the user may read (the two parameters of ``_readable``), as
``list_headers`` lists them."""


def listing_queries(
    sql: Callable[[str], str], wanted: Sequence[str] | None, readers: Sequence[str]
) -> list[tuple[str, list[bytes | str]]]:
    """The statements (and parameters) of a per-session listing: ``sql(where)``, ``where``
    narrowing the sessions to ``wanted`` (in chunks of ``_IN_CHUNK`` ids; every session
    ``readers`` may read when ``None``)."""

    def select(id_count: int | None) -> str:
        where = (
            ""
            if id_count is None
            else " AND session IN (SELECT key FROM sessions "
            f"WHERE id IN ({', '.join('?' * id_count)}))"
        )
        return sql(where) + f" WHERE {_readable('s')}"

    if wanted is None:
        return [(select(None), [*readers])]
    return [
        (select(len(chunk)), [*(encode_text(sid) for sid in chunk), *readers])
        for chunk in (wanted[i : i + _IN_CHUNK] for i in range(0, len(wanted), _IN_CHUNK))
    ]


LAST_EVENT_TIMES_READABLE_SQL = f"{LAST_EVENT_TIMES_SQL} WHERE {_readable('s')}"
"""``LAST_EVENT_TIMES_SQL`` over the sessions the user may read (``read_last_event_times``)."""


def last_event_times(rows: Iterable[Any]) -> dict[str, int]:
    """The rows of ``LAST_EVENT_TIMES_READABLE_SQL`` by session id (none without events)."""
    return {decode_text(sid): time for sid, time in rows if time is not None}


class _ListingMixin(_Decoding):
    """Listings over every session (headers, titles, latest marks, last event times),
    kept while the database is unchanged."""

    _damaged: tuple[DamagedRow, ...]
    _memo_lock: threading.Lock
    _header_memo: dict[Any, SessionHeader]
    _title_memo: dict[Any, tuple[str, SessionTitle]]
    _listings: dict[str, tuple[tuple[int, int], Any]]

    def damaged_rows(self) -> tuple[DamagedRow, ...]:
        return self._damaged

    async def change_token(self) -> int:
        """SQLite's ``PRAGMA data_version`` of this connection: it changes when another
        connection (another process, another window) commits; our own writes leave it be,
        as their caller already knows what it wrote."""

        async def body(conn: aiosqlite.Connection) -> int:
            return int(await _scalar(conn, "PRAGMA data_version"))

        return await self._run(body, write=False)

    async def _listing_key(
        self, conn: aiosqlite.Connection, name: str
    ) -> tuple[tuple[int, int], Any]:
        """The cache key of a whole listing now, and the cached value if still valid."""
        key = (int(await _scalar(conn, "PRAGMA data_version")), self._writes)
        cached = self._listings.get(name)
        return key, (cached[1] if cached is not None and cached[0] == key else None)

    async def list_headers(self) -> list[SessionHeader]:
        async def body(conn: aiosqlite.Connection) -> tuple[tuple[int, int], Any, list[Any]]:
            key, cached = await self._listing_key(conn, "headers")
            if cached is not None:
                return key, cached, []
            rows = await conn.execute_fetchall(HEADERS_SQL, self._readers)
            return key, None, list(rows)

        key, cached, rows = await self._run(body, write=False)
        if cached is not None:
            return list(cached)
        # Building 100,000 headers takes a while: not on the event loop.
        out = await _to_thread(self._build_headers, rows)
        self._listings["headers"] = (key, tuple(out))
        return out

    def _build_headers(self, rows: list[Any]) -> list[SessionHeader]:
        out: list[SessionHeader] = []
        with self._memo_lock:
            memo = self._header_memo
            for row in rows:
                header = memo.get(row)
                if header is None:
                    sid, created_at, cwd, owner = row
                    header = memo[row] = SessionHeader(
                        id=decode_text(sid),
                        created_at=created_at,
                        cwd=None if cwd is None else decode_text(cwd),
                        owner=owner,
                    )
                out.append(header)
            _trim(memo)
        return out

    async def read_titles(
        self, session_ids: Sequence[str] | None = None
    ) -> dict[str, SessionTitle]:
        wanted = None if session_ids is None else check_session_ids(session_ids)
        if wanted is not None and not wanted:
            return {}

        key, cached, rows = await self._listing_rows("titles", titles_sql, wanted)
        if cached is not None:
            return dict(cached)  # the damage of the listing it kept is still _damaged
        # Decoding 100,000 title events takes a while: not on the event loop.
        out, damaged = await _to_thread(self._build_titles, rows)
        if wanted is None:
            self._listings["titles"] = (key, dict(out))
            self._damaged = damaged
        return out

    async def _listing_rows(
        self, name: str, sql: Callable[[str], str], wanted: Sequence[str] | None
    ) -> tuple[tuple[int, int], Any, list[Any]]:
        """The rows of a per-session listing (``sql(where)``, ``where`` narrowing the
        sessions to ``wanted``; every readable one when ``None``), or the whole listing
        ``name`` kept since the last write (``cached``, then no rows)."""

        async def body(conn: aiosqlite.Connection) -> tuple[tuple[int, int], Any, list[Any]]:
            key, cached = await self._listing_key(conn, name)
            if wanted is None and cached is not None:
                return key, cached, []
            rows: list[Any] = []
            for sql_text, params in listing_queries(sql, wanted, self._readers):
                rows.extend(await conn.execute_fetchall(sql_text, params))
            return key, None, rows

        return await self._run(body, write=False)

    async def read_latest_events(
        self, type: str, session_ids: Sequence[str] | None = None
    ) -> dict[str, Event]:
        mark = check_mark_type(type)
        wanted = None if session_ids is None else check_session_ids(session_ids)
        if wanted is not None and not wanted:
            return {}
        name = f"latest {mark}"
        key, cached, rows = await self._listing_rows(
            name, lambda where: latest_events_sql(mark, where), wanted
        )
        if cached is not None:
            return dict(cached)
        out = await _to_thread(self._build_latest, rows)
        if wanted is None:
            self._listings[name] = (key, dict(out))
        return out

    def _build_latest(self, rows: list[Any]) -> dict[str, Event]:
        """``latest_events_sql``'s rows as events by session id; a row that does not
        decode leaves its session out (as a damaged title row does): then each row is
        decoded on its own."""
        sids = [decode_text(row[0]) for row in rows]
        try:
            return dict(zip(sids, self._decode_events([row[1:] for row in rows]), strict=True))
        except StoreError:
            pass
        out: dict[str, Event] = {}
        for sid, row in zip(sids, rows, strict=True):
            try:
                out[sid] = self._decode_events([row[1:]])[0]
            except StoreError:
                continue
        return out

    async def read_last_event_times(self) -> dict[str, int]:
        async def body(conn: aiosqlite.Connection) -> tuple[tuple[int, int], Any, list[Any]]:
            key, cached = await self._listing_key(conn, "last_event_times")
            if cached is not None:
                return key, cached, []
            return (
                key,
                None,
                list(await conn.execute_fetchall(LAST_EVENT_TIMES_READABLE_SQL, self._readers)),
            )

        key, cached, rows = await self._run(body, write=False)
        if cached is not None:
            return dict(cached)
        out = await _to_thread(last_event_times, rows)
        self._listings["last_event_times"] = (key, dict(out))
        return out

    def _build_titles(
        self, rows: list[Any]
    ) -> tuple[dict[str, SessionTitle], tuple[DamagedRow, ...]]:
        """The titles of ``rows``, and the rows that cannot be one (skipped: the session
        is listed without a title, issue 30)."""
        out: dict[str, SessionTitle] = {}
        damaged: list[DamagedRow] = []
        with self._memo_lock:
            memo = self._title_memo
            for row in rows:
                entry = memo.get(row)
                if entry is None:
                    raw_sid, seq, time, data = row
                    sid = decode_text(raw_sid)  # the sessions table's own, already listed
                    try:
                        title = stored_title(seq, time, _title_text(data))
                    except UnicodeDecodeError:
                        damaged.append(DamagedRow("title", "it is not valid UTF-8", None, sid))
                        continue
                    except (ValueError, TypeError, zlib.error) as err:
                        reason = str(err) if isinstance(err, ValueError) else "it is not JSON"
                        if isinstance(err, zlib.error):
                            reason = "its compressed data is corrupt"
                        damaged.append(DamagedRow("title", reason, None, sid))
                        continue
                    entry = memo[row] = (sid, title)
                out[entry[0]] = entry[1]
            _trim(memo)
        return out, tuple(damaged)
