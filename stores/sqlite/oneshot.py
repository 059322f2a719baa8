"""A one-shot, synchronous read of a SQLite store: what ``dsh sessions`` and ``dsh search``
read, on the stdlib ``sqlite3`` module alone (neither aiosqlite nor asyncio load).

It runs the async store's own statements and decoding (``listing``: ``HEADERS_SQL``,
``listing_queries``, ``titles_sql``, ``latest_events_sql``, the ``_build_*`` methods;
``search``: ``search_statement``; the same ``_readable`` rows for the
same user), all in one read transaction. It only ever reads: ``OneShotReader.open``
returns ``None`` whenever opening the store would do more than read, or could fail, so
that the caller opens the store the usual way and behaves, and words its errors, as it
always did: the file is missing (opening creates it), its schema needs an upgrade or is
newer, it is not in WAL mode yet (the store switches it), sessions await indexing (the
store indexes them when it opens), or SQLite fails at all (locked, corrupt, not a
database, a full disk).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from core.damage import DamagedRow
from core.log import Event, SessionHeader
from core.query import SessionTitle
from core.search import SearchHit
from stores.sharing import check_user, os_user
from stores.sqlite.connection import _BUSY_TIMEOUT_S, _connect_target, _file_is_read_only
from stores.sqlite.listing import (
    HEADERS_SQL,
    LAST_EVENT_TIMES_READABLE_SQL,
    _ListingMixin,
    last_event_times,
    latest_events_sql,
    listing_queries,
    titles_sql,
)
from stores.sqlite.schema import SCHEMA_VERSION
from stores.sqlite.search import _holds, search_statement
from stores.validation import check_mark_type, check_session_ids

__all__ = ["OneShotReader"]


class _Rows(_ListingMixin):
    """The async store's decoding of listing rows (its ``_build_*`` methods and what they
    use), without a connection: ``OneShotReader`` reads the rows."""

    def __init__(self, path: Path, user: str) -> None:
        self._conn = None
        self._path = path
        self._user = user
        self._readers = (user, user)
        self._read_only = True
        self._read_only_reason = None
        self._damaged: tuple[DamagedRow, ...] = ()
        self._memo_lock = threading.Lock()
        self._header_memo: dict[Any, SessionHeader] = {}
        self._title_memo: dict[Any, tuple[str, SessionTitle]] = {}


class OneShotReader:
    """The reads of one command on an open ``sqlite3`` connection, inside one read
    transaction (``close`` ends it). Use ``open``."""

    def __init__(self, raw: sqlite3.Connection, path: Path, user: str) -> None:
        self._raw = raw
        self._closed = False
        self._rows = _Rows(path, user)
        self._readers = self._rows._readers

    @classmethod
    def open(cls, path: str | Path, user: str | None = None) -> OneShotReader | None:
        """The reader of the database at ``path`` as ``user`` (default: the OS user, as
        the store), or ``None`` when the store must open it (see the module's docstring)."""
        db_path = Path(path)
        try:
            if not db_path.is_file():
                return None
            read_only = _file_is_read_only(db_path)
            target = _connect_target(db_path, read_only, "mode=ro")
            raw = sqlite3.connect(
                target, uri=read_only, isolation_level=None, timeout=_BUSY_TIMEOUT_S
            )
        except (OSError, ValueError, sqlite3.Error):
            return None
        try:
            reader = cls(raw, db_path, os_user() if user is None else check_user(user))
            if reader._usable(read_only):
                return reader
        except (OSError, ValueError, sqlite3.Error):
            pass
        with contextlib.suppress(sqlite3.Error):
            raw.close()
        return None

    def _usable(self, read_only: bool) -> bool:
        """Set the connection up as the store does (``_setup``) and say whether the store
        would find nothing to do on opening the file (and then begin the read)."""
        raw = self._raw
        raw.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT_S * 1000)}")
        raw.create_function("dsh_holds", 2, _holds, deterministic=True)
        (version,) = raw.execute("PRAGMA user_version").fetchone()
        if version != SCHEMA_VERSION:
            return False
        if not read_only:
            (mode,) = raw.execute("PRAGMA journal_mode").fetchone()
            if str(mode).lower() != "wal":
                return False
        raw.execute("BEGIN")
        tables = {
            name for (name,) in raw.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")
        }
        if not {"sessions", "events", "search_pending"} <= tables:
            return False
        return raw.execute("SELECT 1 FROM search_pending LIMIT 1").fetchone() is None

    def close(self) -> None:
        """End the read and close the connection (idempotent)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(sqlite3.Error):
            if self._raw.in_transaction:
                self._raw.execute("COMMIT")
        self._raw.close()

    def __enter__(self) -> OneShotReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # The reads, as the async store's methods of the same names return them.

    def current_user(self) -> str:
        return self._rows.current_user()

    def damaged_rows(self) -> tuple[DamagedRow, ...]:
        """What the latest listing of every title skipped (as the store's)."""
        return self._rows.damaged_rows()

    def list_headers(self) -> list[SessionHeader]:
        rows = self._raw.execute(HEADERS_SQL, self._readers).fetchall()
        return self._rows._build_headers(rows)

    def read_titles(self, session_ids: Sequence[str] | None = None) -> dict[str, SessionTitle]:
        wanted = None if session_ids is None else check_session_ids(session_ids)
        if wanted is not None and not wanted:
            return {}
        out, damaged = self._rows._build_titles(self._listing(titles_sql, wanted))
        if wanted is None:
            self._rows._damaged = damaged
        return out

    def read_latest_events(
        self, type: str, session_ids: Sequence[str] | None = None
    ) -> dict[str, Event]:
        mark = check_mark_type(type)
        wanted = None if session_ids is None else check_session_ids(session_ids)
        if wanted is not None and not wanted:
            return {}
        rows = self._listing(lambda where: latest_events_sql(mark, where), wanted)
        return self._rows._build_latest(rows)

    def read_last_event_times(self) -> dict[str, int]:
        return last_event_times(self._raw.execute(LAST_EVENT_TIMES_READABLE_SQL, self._readers))

    def search_messages(self, query: str, *, limit: int = 20) -> list[SearchHit]:
        statement = search_statement(query, limit, self._readers)
        if statement is None:
            return []
        return statement.plan.rank(statement.rows(self._raw))

    def unindexed_sessions(self) -> int:
        """0: a database with sessions awaiting indexing is never read here (``open``)."""
        return 0

    def _listing(self, sql: Callable[[str], str], wanted: Sequence[str] | None) -> list[Any]:
        rows: list[Any] = []
        for text, params in listing_queries(sql, wanted, self._readers):
            rows += self._raw.execute(text, params).fetchall()
        return rows
