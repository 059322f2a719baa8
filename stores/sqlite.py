"""``SqliteSessionStore``: the durable ``SessionStore`` on one SQLite file (aiosqlite).

Text the user controls (session ids, cwds, event types) is stored as a BLOB of its
``surrogatepass`` UTF-8 bytes: that round-trips every Python ``str`` (lone surrogates,
NUL…) and its byte order is code-point order, so ``ORDER BY id`` sorts like Python.
Event data is the JavaScript-identical JSON text from ``core.jsoncodec`` (always valid
UTF-8: surrogates are escaped) and is parsed back with ``loads_exact``.

Every operation is one transaction on one connection, serialised by an ``asyncio.Lock``;
writes use ``BEGIN IMMEDIATE`` so concurrent writers (other processes) queue on the busy
timeout instead of failing half-way, and a residual ``SQLITE_BUSY`` is retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import stat
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import aiosqlite

from core.config import default_database_path
from core.errors import (
    DiskFullError,
    InvalidEventError,
    SessionExistsError,
    SessionNotFoundError,
    StoreError,
)
from core.jsoncodec import loads_exact
from core.log import (
    Event,
    NewEvent,
    SessionHeader,
    SurfaceOp,
    SurfaceRow,
    ValidatedEvent,
    build_event,
    now_ms,
    surface_op_from_json,
    surface_op_to_json,
)
from core.query import SessionTitle
from core.surface import SurfaceFolder
from stores.validation import (
    KIND_SURFACE,
    KIND_TITLE,
    batch_has_replace,
    check_batch,
    check_seqs,
    check_session_id,
    check_session_ids,
    event_kind,
    import_header,
    missing_seq_error,
    new_header,
    title_of,
    validate_batch,
    validate_event,
)

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SqliteSessionStore"]

T = TypeVar("T")

# Forward migrations: MIGRATIONS[i] takes user_version i to i + 1, in one transaction.
# To change the schema, append a step; never edit a released one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """
        CREATE TABLE sessions (
            id          BLOB    NOT NULL PRIMARY KEY,  -- surrogatepass UTF-8
            created_at  INTEGER NOT NULL,              -- epoch milliseconds
            cwd         BLOB                           -- surrogatepass UTF-8 or NULL
        ) STRICT, WITHOUT ROWID
        """,
        "CREATE INDEX sessions_by_created ON sessions (created_at DESC, id)",
        """
        CREATE TABLE events (
            session_id        BLOB    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            seq               INTEGER NOT NULL CHECK (seq >= 0),
            type              BLOB    NOT NULL,  -- surrogatepass UTF-8
            time              INTEGER NOT NULL,  -- epoch milliseconds
            kind              INTEGER NOT NULL CHECK (kind IN (0, 1, 2)),  -- log, surface, title
            data              TEXT    NOT NULL,  -- JSON object (core.jsoncodec.dumps_js)
            surface_op        TEXT,              -- JSON: "append" | {"op":"replace",...} | NULL
            source_event_seqs TEXT,              -- JSON array of seqs or NULL
            PRIMARY KEY (session_id, seq),
            CHECK ((kind = 1) = (surface_op IS NOT NULL))
        ) STRICT
        """,
        # The surface of a session without touching its log-only events.
        "CREATE INDEX events_surface ON events (session_id, seq) WHERE kind = 1",
        # The latest title of every session: one index seek per session.
        "CREATE INDEX events_title ON events (session_id, seq) WHERE kind = 2",
    ),
    (
        # One reply at a time per session, across processes: the holder of a session's
        # row writes its reply; an expired row (its holder died) may be taken over.
        """
        CREATE TABLE reply_leases (
            session_id  BLOB    NOT NULL PRIMARY KEY
                                REFERENCES sessions (id) ON DELETE CASCADE,
            owner       TEXT    NOT NULL,
            expires_at  INTEGER NOT NULL  -- epoch milliseconds
        ) STRICT, WITHOUT ROWID
        """,
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)

_BUSY_TIMEOUT_S = 10.0
# How long a write keeps retrying an SQLITE_BUSY that escaped the busy handler.
_RETRY_WINDOW_S = 30.0
# Ids per statement in ``read_titles`` (well under SQLITE_MAX_VARIABLE_NUMBER).
_IN_CHUNK = 500

_EVENT_COLUMNS = "seq, type, time, data, surface_op, source_event_seqs"
_SEQS_PER_QUERY = 500
"""Seqs bound per ``IN (…)`` (well under SQLite's 32,766 host parameters)."""


def _enc(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _dec(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogatepass")


def _is_busy(err: sqlite3.Error) -> bool:
    name = getattr(err, "sqlite_errorname", "") or ""
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return True
    text = str(err)
    return "database is locked" in text or "database table is locked" in text


def _is_read_only_error(err: sqlite3.Error) -> bool:
    name = getattr(err, "sqlite_errorname", "") or ""
    return name.startswith("SQLITE_READONLY") or "readonly database" in str(err)


_NEARLY_FULL_BYTES = 1 << 20
"""Free space under which an I/O error is taken for a full disk."""


def _is_disk_full(err: sqlite3.Error, path: Path) -> bool:
    """``SQLITE_FULL`` (SQLite's word for ENOSPC on a write, or a size limit), or an I/O
    error while the disk holding ``path`` is (nearly) full: growing the ``-shm`` file of a
    WAL database fails as ``SQLITE_IOERR_SHMSIZE``, "disk I/O error"."""
    name = getattr(err, "sqlite_errorname", "") or ""
    text = str(err)
    if name.startswith("SQLITE_FULL") or "database or disk is full" in text:
        return True
    if name.startswith("SQLITE_IOERR") or "disk I/O error" in text:
        return _free_bytes(path.parent) < _NEARLY_FULL_BYTES
    return False


def _free_bytes(folder: Path) -> int:
    """Bytes this process may still write under ``folder`` (a large number when unknown)."""
    try:
        stats = os.statvfs(folder)
    except (OSError, AttributeError):  # AttributeError: no statvfs on this platform
        return 1 << 62
    root = getattr(os, "geteuid", lambda: -1)() == 0  # root may use the reserved blocks
    return (stats.f_bfree if root else stats.f_bavail) * stats.f_frsize


def _connect_target(db_path: Path, read_only: bool, options: str) -> str:
    """What to hand ``sqlite3.connect``: a ``file:`` URI with ``options`` when read-only
    (the file must exist), else the path (its folder is created)."""
    if read_only:
        if not db_path.exists():
            raise StoreError(f"{db_path}: cannot open read-only: the file does not exist")
        return db_path.resolve().as_uri() + "?" + options
    try:
        db_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise StoreError(f"{db_path}: cannot create its directory: {err}") from err
    return str(db_path)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _store_error(path: Path, what: str, err: sqlite3.Error) -> StoreError:
    """The one translation of an SQLite error into the ``StoreError`` a user reads."""
    if _is_disk_full(err, path):
        return DiskFullError(f"{path}: {what}: the disk is full ({err})")
    if _is_read_only_error(err):
        return StoreError(f"{path}: the database is read-only ({err})")
    if isinstance(err, sqlite3.DatabaseError) and (
        "not a database" in str(err) or "malformed" in str(err)
    ):
        return StoreError(f"{path}: not a SQLite database or corrupt ({err})")
    return StoreError(f"{path}: {what}: {err}")


async def _scalar(conn: aiosqlite.Connection, sql: str, params: Sequence[Any] = ()) -> Any:
    """The first column of the first row (``None`` when there is no row)."""
    for row in await conn.execute_fetchall(sql, params):
        return row[0]
    return None


def _consume(task: asyncio.Task[Any]) -> None:
    # A caller that was cancelled no longer awaits this task; mark its outcome as seen.
    if not task.cancelled():
        task.exception()


# Entries per decoded-row memo; past it the memo starts over (it is only a cache).
_MEMO_LIMIT = 250_000


def _trim(memo: dict[Any, Any]) -> None:
    if len(memo) > _MEMO_LIMIT:
        memo.clear()


async def _worker_stopped(connection: aiosqlite.Connection) -> None:
    """Wait for the worker thread of a connection that failed to open.

    aiosqlite queues its stop and returns without waiting. If the caller's event loop
    closed first (a CLI run ending on the error), the thread died reporting to that closed
    loop, printing a traceback."""
    thread = getattr(connection, "_thread", None)  # aiosqlite keeps no public handle
    if isinstance(thread, threading.Thread) and thread.is_alive():
        await asyncio.to_thread(thread.join, 5.0)


def _file_is_read_only(path: Path) -> bool:
    """No write access, or no write bit at all (so a chmod 444 is honoured even as root)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not os.access(path, os.W_OK) or not (stat.S_IMODE(mode) & 0o222)


class SqliteSessionStore:
    """A ``SessionStore`` on one SQLite file; create it with ``await SqliteSessionStore.open(path)``."""

    def __init__(self, conn: aiosqlite.Connection, path: Path, *, read_only: bool) -> None:
        """Internal: use :meth:`open`, which configures and migrates the connection."""
        self._conn: aiosqlite.Connection | None = conn
        self._path = path
        self._read_only = read_only
        self._read_only_reason: str | None = None
        self._lock = asyncio.Lock()
        # Decoded headers and titles keyed by their raw row (bytes, ints and JSON text), so
        # a hit is exact by construction: listing every session (the @ picker does it on
        # each keystroke) then only decodes what changed. The values are immutable.
        self._memo_lock = threading.Lock()  # the memos are filled in worker threads
        self._header_memo: dict[Any, SessionHeader] = {}
        self._title_memo: dict[Any, tuple[str, SessionTitle]] = {}
        # Whole listings (all headers, all titles) are reused while the database is
        # unchanged: no commit by another connection (PRAGMA data_version) nor by us.
        self._writes = 0
        self._listings: dict[str, tuple[tuple[int, int], Any]] = {}

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        read_only: bool = False,
        busy_timeout: float = _BUSY_TIMEOUT_S,
    ) -> SqliteSessionStore:
        """Open (creating and migrating when needed) the database at ``path``
        (default: :func:`stores.default_database_path`).

        A file without write permission opens read-only, as does ``read_only=True``: reads
        work and writes raise ``StoreError``. A file that is not a dsh database, is
        corrupt, or has a newer schema raises ``StoreError``.

        When the disk is full, a WAL database cannot even be read the normal way (SQLite
        must create and size its ``-shm`` file): it is then opened read-only instead
        (see :meth:`_open_when_full`), ``read_only_reason`` says why, and every write
        raises ``DiskFullError``.
        """
        db_path = Path(path) if path is not None else default_database_path()
        if not read_only and _file_is_read_only(db_path):
            read_only = True
        try:
            return await cls._connect(db_path, read_only, busy_timeout)
        except DiskFullError as err:
            if read_only or not db_path.is_file():
                raise
            return await cls._open_when_full(db_path, busy_timeout, err)

    @classmethod
    async def _open_when_full(
        cls, db_path: Path, busy_timeout: float, err: DiskFullError
    ) -> SqliteSessionStore:
        """The read-only fallback on a full disk.

        ``mode=ro`` first: it reads exactly what a normal connection would (WAL included),
        but needs the ``-shm`` file to exist at its full size already (another process has
        the database open). Else ``immutable=1``: no locks and no ``-shm`` at all, at the
        cost that commits still in the ``-wal`` file are not seen and a concurrent writer
        could make a read fail; on a full disk nobody can write much, so reading is worth
        that. Raises ``err`` (the disk is full) when neither works.
        """
        wal = db_path.with_name(db_path.name + "-wal")
        for options in ("mode=ro", "mode=ro&immutable=1"):
            try:
                store = await cls._connect(db_path, True, busy_timeout, options)
            except StoreError:
                continue
            reason = "the disk is full, so dsh opened the database read-only"
            if "immutable" in options and _size(wal) > 0:
                reason += " (its newest changes, still in the write-ahead log, are not shown)"
            store._read_only_reason = reason
            return store
        raise err

    @classmethod
    async def _connect(
        cls, db_path: Path, read_only: bool, busy_timeout: float, options: str = "mode=ro"
    ) -> SqliteSessionStore:
        target = _connect_target(db_path, read_only, options)
        connection = aiosqlite.connect(
            target,
            uri=read_only,
            isolation_level=None,  # we issue BEGIN/COMMIT ourselves
            timeout=busy_timeout,
        )
        try:
            conn = await connection
        except BaseException as err:
            await _worker_stopped(connection)
            if isinstance(err, sqlite3.Error):
                raise _store_error(db_path, "cannot open the database", err) from err
            raise
        store = cls(conn, db_path, read_only=read_only)
        try:
            await store._setup(busy_timeout)
        except BaseException:
            with contextlib.suppress(Exception):
                await conn.close()
            store._conn = None
            raise
        return store

    async def _setup(self, busy_timeout: float) -> None:
        conn = self._live()
        try:
            await conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            await conn.execute("PRAGMA foreign_keys = ON")
            version = await self._user_version()
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self._path}: the database has schema version {version}, newer than this "
                    f"dsh understands ({SCHEMA_VERSION}); upgrade dsh"
                )
            if not self._read_only:
                await self._retry_busy(self._enable_wal)
                await conn.execute("PRAGMA synchronous = NORMAL")
            if version < SCHEMA_VERSION:
                if self._read_only:
                    raise StoreError(
                        f"{self._path}: the database is read-only and its schema "
                        f"(version {version}) needs an upgrade to {SCHEMA_VERSION}"
                    )
                await self._retry_busy(self._migrate)
            rows = await conn.execute_fetchall(
                "SELECT name FROM sqlite_schema WHERE type = 'table'"
            )
            tables = {row[0] for row in rows}
            if not {"sessions", "events"} <= tables:
                raise StoreError(f"{self._path}: not a dsh database (tables are missing)")
        except sqlite3.Error as err:
            raise self._error("cannot open the database", err) from err

    async def _user_version(self) -> int:
        return int(await _scalar(self._live(), "PRAGMA user_version"))

    async def _enable_wal(self) -> None:
        mode = str(await _scalar(self._live(), "PRAGMA journal_mode = WAL")).lower()
        if mode != "wal":
            raise StoreError(f"{self._path}: cannot switch the database to WAL (got {mode!r})")

    async def _migrate(self) -> None:
        conn = self._live()
        await conn.execute("BEGIN IMMEDIATE")
        try:
            version = await self._user_version()  # another process may have migrated meanwhile
            if version == 0 and await _scalar(conn, "SELECT count(*) FROM sqlite_schema"):
                raise StoreError(
                    f"{self._path}: not a dsh database (it has tables but no dsh schema)"
                )
            for step in range(version, SCHEMA_VERSION):
                for statement in MIGRATIONS[step]:
                    await conn.execute(statement)
                await conn.execute(f"PRAGMA user_version = {step + 1}")
            await conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                await conn.execute("ROLLBACK")
            raise

    async def _retry_busy(self, op: Callable[[], Awaitable[T]]) -> T:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _RETRY_WINDOW_S
        delay = 0.002
        while True:
            try:
                return await op()
            except sqlite3.OperationalError as err:
                if not _is_busy(err) or loop.time() >= deadline:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.1)

    async def __aenter__(self) -> SqliteSessionStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection once running operations finish (idempotent)."""
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                try:
                    await conn.close()
                except sqlite3.Error as err:
                    raise self._error("closing failed", err) from err

    @property
    def path(self) -> Path:
        return self._path

    @property
    def read_only(self) -> bool:
        return self._read_only

    @property
    def read_only_reason(self) -> str | None:
        """Why a database that should be writable was opened read-only (a full disk), or
        ``None``: a host shows it next to its read-only notice."""
        return self._read_only_reason

    # ------------------------------------------------------------------ plumbing

    def _live(self) -> aiosqlite.Connection:
        if self._conn is None:
            raise StoreError(f"{self._path}: the store is closed")
        return self._conn

    def _error(self, what: str, err: sqlite3.Error) -> StoreError:
        return _store_error(self._path, what, err)

    async def _run(self, body: Callable[[aiosqlite.Connection], Awaitable[T]], *, write: bool) -> T:
        """Run ``body`` in one transaction, serialised with every other operation.

        Once started, the transaction runs to its end (commit or rollback) even if the
        caller is cancelled, so the connection is never left inside a transaction.
        """
        if write and self._read_only:
            if self._read_only_reason is not None:
                raise DiskFullError(
                    f"{self._path}: nothing can be written: {self._read_only_reason}; "
                    "free some space and try again"
                )
            raise StoreError(f"{self._path}: the database is opened read-only")
        await self._lock.acquire()
        try:
            task = asyncio.ensure_future(self._transaction(body, write))
        except BaseException:
            self._lock.release()
            raise
        task.add_done_callback(self._finished)
        return await asyncio.shield(task)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._lock.release()
        _consume(task)

    async def _transaction(
        self, body: Callable[[aiosqlite.Connection], Awaitable[T]], write: bool
    ) -> T:
        conn = self._live()

        async def attempt() -> T:
            await conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                result = await body(conn)
                await conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    await conn.execute("ROLLBACK")
                raise
            finally:
                if write:
                    self._writes += 1
            return result

        try:
            return await self._retry_busy(attempt)
        except sqlite3.Error as err:
            raise self._error("write failed" if write else "read failed", err) from err

    @staticmethod
    async def _require_session(conn: aiosqlite.Connection, session_id: str) -> SessionHeader:
        rows = list(
            await conn.execute_fetchall(
                "SELECT created_at, cwd FROM sessions WHERE id = ?", (_enc(session_id),)
            )
        )
        if not rows:
            raise SessionNotFoundError(session_id)
        created_at, cwd = rows[0]
        return SessionHeader(
            id=session_id, created_at=created_at, cwd=None if cwd is None else _dec(cwd)
        )

    def _decode_events(self, rows: list[Any]) -> list[Event]:
        """Decode ``rows``, releasing each raw row as soon as its event exists (so the raw
        text and the decoded events of a large session are not both held in full).

        The hot loop of every large read: a handful of distinct types are decoded once,
        and an append (nearly every surface event) skips the op parser."""
        out: list[Event] = []
        append = out.append
        types: dict[bytes, str] = {}
        loads = loads_exact
        build = build_event
        try:
            for i, (seq, raw_type, time, data, surface_op, source_seqs) in enumerate(rows):
                type_ = types.get(raw_type)
                if type_ is None:
                    type_ = types[raw_type] = _dec(raw_type)
                if surface_op is None:
                    op: SurfaceOp | None = None
                elif surface_op == _APPEND_JSON:
                    op = "append"
                else:
                    op = _decode_op(surface_op)
                seqs = None if source_seqs is None else _decode_seqs(source_seqs)
                append(build(seq, type_, time, loads(data), op, seqs))
                rows[i] = None
        except (ValueError, TypeError) as err:
            raise StoreError(f"{self._path}: a stored event is corrupt ({err})") from err
        return out

    def _decode_surface_rows(self, rows: list[Any]) -> list[SurfaceRow]:
        try:
            return [
                SurfaceRow(
                    seq,
                    _decode_op(surface_op),
                    None if source_seqs is None else _decode_seqs(source_seqs),
                )
                for seq, surface_op, source_seqs in rows
            ]
        except (ValueError, TypeError) as err:
            raise StoreError(f"{self._path}: a stored event is corrupt ({err})") from err

    # ------------------------------------------------------------------ writes

    async def create_session(
        self,
        session_id: str | None = None,
        *,
        cwd: str | None = None,
        created_at: int | None = None,
    ) -> SessionHeader:
        header = new_header(session_id, cwd, created_at)

        async def body(conn: aiosqlite.Connection) -> SessionHeader:
            await _insert_session(conn, header)
            return header

        return await self._run(body, write=True)

    async def append(
        self,
        session_id: str,
        type: str,
        data: Any,
        *,
        surface_op: SurfaceOp | None = None,
        source_event_seqs: Sequence[int] | None = None,
        time: int | None = None,
    ) -> Event:
        sid = check_session_id(session_id)
        validated = validate_event(type, data, surface_op, source_event_seqs, time)
        return (await self._append(sid, [validated]))[0]

    async def append_batch(self, session_id: str, events: Sequence[NewEvent]) -> list[Event]:
        sid = check_session_id(session_id)
        return await self._append(sid, validate_batch(events))

    async def _append(self, session_id: str, batch: list[ValidatedEvent]) -> list[Event]:
        key = _enc(session_id)

        async def body(conn: aiosqlite.Connection) -> list[Event]:
            await self._require_session(conn, session_id)
            if not batch:
                return []
            last = await _scalar(conn, "SELECT max(seq) FROM events WHERE session_id = ?", (key,))
            first = 0 if last is None else last + 1
            folder: SurfaceFolder[None] = SurfaceFolder()
            if batch_has_replace(batch):
                surface = await conn.execute_fetchall(
                    "SELECT seq, surface_op, source_event_seqs FROM events "
                    f"WHERE session_id = ? AND kind = {KIND_SURFACE} ORDER BY seq",
                    (key,),
                )
                for seq, op, seqs in surface:
                    folder.apply(
                        seq, _decode_op(op), None if seqs is None else _decode_seqs(seqs), None
                    )
            return await _insert_events(conn, key, first, folder, batch)

        return await self._run(body, write=True)

    async def import_session(
        self, header: SessionHeader, events: Sequence[NewEvent]
    ) -> SessionHeader:
        """Create a session with exactly this header and log (seqs from 0), all or nothing.

        A taken id raises ``SessionExistsError``; a bad event ``InvalidEventError``.
        """
        checked = import_header(header)
        batch = validate_batch(events)

        async def body(conn: aiosqlite.Connection) -> SessionHeader:
            await _insert_session(conn, checked)
            await _insert_events(conn, _enc(checked.id), 0, SurfaceFolder(), batch)
            return checked

        return await self._run(body, write=True)

    async def delete_session(self, session_id: str) -> None:
        sid = check_session_id(session_id)

        async def body(conn: aiosqlite.Connection) -> None:
            cursor = await conn.execute("DELETE FROM sessions WHERE id = ?", (_enc(sid),))
            if cursor.rowcount == 0:
                raise SessionNotFoundError(sid)

        await self._run(body, write=True)

    async def take_reply_lease(
        self,
        session_id: str,
        owner: str,
        *,
        ttl_ms: int,
        dead: Callable[[str], bool] | None = None,
    ) -> bool:
        sid = check_session_id(session_id)
        key = _enc(sid)

        async def body(conn: aiosqlite.Connection) -> bool:
            await self._require_session(conn, sid)
            now = now_ms()
            # BEGIN IMMEDIATE (a write) makes the check and the take one step for every process.
            for held, expires_at in await conn.execute_fetchall(
                "SELECT owner, expires_at FROM reply_leases WHERE session_id = ?", (key,)
            ):
                if held != owner and expires_at > now and not (dead is not None and dead(held)):
                    return False
            await conn.execute(
                "INSERT OR REPLACE INTO reply_leases (session_id, owner, expires_at) "
                "VALUES (?, ?, ?)",
                (key, owner, now + ttl_ms),
            )
            return True

        return await self._run(body, write=True)

    async def release_reply_lease(self, session_id: str, owner: str) -> None:
        sid = check_session_id(session_id)

        async def body(conn: aiosqlite.Connection) -> None:
            await conn.execute(
                "DELETE FROM reply_leases WHERE session_id = ? AND owner = ?", (_enc(sid), owner)
            )

        await self._run(body, write=True)

    # ------------------------------------------------------------------ reads

    async def change_token(self) -> int:
        """SQLite's ``PRAGMA data_version`` of this connection: it changes when another
        connection (another process, another window) commits; our own writes leave it be,
        as their caller already knows what it wrote."""

        async def body(conn: aiosqlite.Connection) -> int:
            return int(await _scalar(conn, "PRAGMA data_version"))

        return await self._run(body, write=False)

    async def last_surface_seq(self, session_id: str) -> int | None:
        sid = check_session_id(session_id)

        async def body(conn: aiosqlite.Connection) -> int | None:
            await self._require_session(conn, sid)
            last = await _scalar(
                conn,
                f"SELECT max(seq) FROM events WHERE session_id = ? AND kind = {KIND_SURFACE}",
                (_enc(sid),),
            )
            return None if last is None else int(last)

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
            rows = await conn.execute_fetchall(
                "SELECT id, created_at, cwd FROM sessions ORDER BY created_at DESC, id"
            )
            return key, None, list(rows)

        key, cached, rows = await self._run(body, write=False)
        if cached is not None:
            return list(cached)
        # Building 100,000 headers takes a while: not on the event loop.
        out = await asyncio.to_thread(self._build_headers, rows)
        self._listings["headers"] = (key, tuple(out))
        return out

    def _build_headers(self, rows: list[Any]) -> list[SessionHeader]:
        out: list[SessionHeader] = []
        with self._memo_lock:
            memo = self._header_memo
            for row in rows:
                header = memo.get(row)
                if header is None:
                    sid, created_at, cwd = row
                    header = memo[row] = SessionHeader(
                        id=_dec(sid), created_at=created_at, cwd=None if cwd is None else _dec(cwd)
                    )
                out.append(header)
            _trim(memo)
        return out

    async def read_header(self, session_id: str) -> SessionHeader:
        sid = check_session_id(session_id)

        async def body(conn: aiosqlite.Connection) -> SessionHeader:
            return await self._require_session(conn, sid)

        return await self._run(body, write=False)

    async def read_events(self, session_id: str) -> list[Event]:
        sid = check_session_id(session_id)

        async def body(conn: aiosqlite.Connection) -> list[Any]:
            await self._require_session(conn, sid)
            rows = await conn.execute_fetchall(
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE session_id = ? ORDER BY seq",
                (_enc(sid),),
            )
            return list(rows)

        # Decoding thousands of rows is CPU work: keep it off the event loop.
        return await asyncio.to_thread(self._decode_events, await self._run(body, write=False))

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

    async def _read_surface(
        self, session_id: str, columns: str, decode: Callable[[list[Any]], list[T]]
    ) -> tuple[SessionHeader, int | None, list[T]]:
        """Header, last raw seq and the surface rows (``columns``) in one read transaction;
        the rows are decoded off the event loop."""
        sid = check_session_id(session_id)

        async def body(
            conn: aiosqlite.Connection,
        ) -> tuple[SessionHeader, int | None, list[Any]]:
            header = await self._require_session(conn, sid)
            key = _enc(sid)
            last = await _scalar(conn, "SELECT max(seq) FROM events WHERE session_id = ?", (key,))
            rows = await conn.execute_fetchall(
                f"SELECT {columns} FROM events "
                f"WHERE session_id = ? AND kind = {KIND_SURFACE} ORDER BY seq",
                (key,),
            )
            return header, last, list(rows)

        header, last, rows = await self._run(body, write=False)
        return header, last, await asyncio.to_thread(decode, rows)

    async def read_events_at(self, session_id: str, seqs: Sequence[int]) -> list[Event]:
        sid = check_session_id(session_id)
        wanted = check_seqs(seqs)

        async def body(conn: aiosqlite.Connection) -> list[Any]:
            await self._require_session(conn, sid)
            rows: list[Any] = []
            distinct = sorted(set(wanted))
            for start in range(0, len(distinct), _SEQS_PER_QUERY):
                chunk = distinct[start : start + _SEQS_PER_QUERY]
                rows.extend(
                    await conn.execute_fetchall(
                        f"SELECT {_EVENT_COLUMNS} FROM events WHERE session_id = ? "
                        f"AND seq IN ({', '.join('?' * len(chunk))})",
                        (_enc(sid), *chunk),
                    )
                )
            return rows

        rows = await self._run(body, write=False)
        by_seq = {event.seq: event for event in await asyncio.to_thread(self._decode_events, rows)}
        for seq in wanted:
            if seq not in by_seq:
                raise missing_seq_error(sid, seq)
        return [by_seq[seq] for seq in wanted]

    async def read_titles(
        self, session_ids: Sequence[str] | None = None
    ) -> dict[str, SessionTitle]:
        wanted = None if session_ids is None else check_session_ids(session_ids)
        if wanted is not None and not wanted:
            return {}

        def select(id_count: int | None) -> str:
            where = "" if id_count is None else f" AND session_id IN ({', '.join('?' * id_count)})"
            return titles_sql(where)

        async def body(conn: aiosqlite.Connection) -> tuple[tuple[int, int], Any, list[Any]]:
            key, cached = await self._listing_key(conn, "titles")
            if wanted is None and cached is not None:
                return key, cached, []
            if wanted is None:
                queries: Iterable[tuple[str, list[bytes]]] = [(select(None), [])]
            else:
                queries = (
                    (select(len(chunk)), [_enc(sid) for sid in chunk])
                    for chunk in (
                        wanted[i : i + _IN_CHUNK] for i in range(0, len(wanted), _IN_CHUNK)
                    )
                )
            rows: list[Any] = []
            for sql, params in queries:
                rows.extend(await conn.execute_fetchall(sql, params))
            return key, None, rows

        key, cached, rows = await self._run(body, write=False)
        if cached is not None:
            return dict(cached)
        # Decoding 100,000 title events takes a while: not on the event loop.
        out = await asyncio.to_thread(self._build_titles, rows)
        if wanted is None:
            self._listings["titles"] = (key, dict(out))
        return out

    async def read_last_event_times(self) -> dict[str, int]:
        async def body(conn: aiosqlite.Connection) -> tuple[tuple[int, int], Any, list[Any]]:
            key, cached = await self._listing_key(conn, "last_event_times")
            if cached is not None:
                return key, cached, []
            return key, None, list(await conn.execute_fetchall(LAST_EVENT_TIMES_SQL))

        key, cached, rows = await self._run(body, write=False)
        if cached is not None:
            return dict(cached)
        out = await asyncio.to_thread(
            lambda: {_dec(sid): time for sid, time in rows if time is not None}
        )
        self._listings["last_event_times"] = (key, dict(out))
        return out

    def _build_titles(self, rows: list[Any]) -> dict[str, SessionTitle]:
        out: dict[str, SessionTitle] = {}
        with self._memo_lock:
            memo = self._title_memo
            for row in rows:
                entry = memo.get(row)
                if entry is None:
                    sid, seq, time, data = row
                    try:
                        entry = memo[row] = (_dec(sid), title_of(seq, time, loads_exact(data)))
                    except (ValueError, TypeError, KeyError) as err:
                        raise StoreError(
                            f"{self._path}: a stored title is corrupt ({err})"
                        ) from err
                out[entry[0]] = entry[1]
            _trim(memo)
        return out


def titles_sql(where: str = "") -> str:
    """The latest title event of each session (``where`` narrows the sessions).

    The highest title seq per session comes from the partial index ``events_title``
    alone, and, as the only aggregate is ``max()``, SQLite takes the bare ``rowid`` from
    that same row: each title row is then one rowid lookup (joining on
    ``(session_id, seq)`` instead costs a second index search per session, ~1.7x).
    """
    return (
        "SELECT e.session_id, e.seq, e.time, e.data FROM ("
        f"SELECT max(seq), rowid AS r FROM events WHERE kind = {KIND_TITLE}{where} "
        "GROUP BY session_id) AS t "
        "JOIN events AS e ON e.rowid = t.r"
    )


LAST_EVENT_TIMES_SQL = (
    "SELECT s.id, (SELECT e.time FROM events AS e WHERE e.session_id = s.id "
    "ORDER BY e.seq DESC LIMIT 1) FROM sessions AS s"
)
"""The ``time`` of each session's last event (``NULL`` without events): per session, one descending seek in the
primary-key index ``(session_id, seq)``, so the cost grows with the number of sessions,
not of events (a ``GROUP BY`` over ``events`` would read every event's index entry)."""


async def _insert_session(conn: aiosqlite.Connection, header: SessionHeader) -> None:
    try:
        await conn.execute(
            "INSERT INTO sessions (id, created_at, cwd) VALUES (?, ?, ?)",
            (_enc(header.id), header.created_at, None if header.cwd is None else _enc(header.cwd)),
        )
    except sqlite3.IntegrityError as err:
        raise SessionExistsError(header.id) from err


async def _insert_events(
    conn: aiosqlite.Connection,
    key: bytes,
    first: int,
    folder: SurfaceFolder[None],
    batch: Sequence[ValidatedEvent],
) -> list[Event]:
    """Check ``batch`` against ``folder`` (see ``check_batch``), then insert it from seq
    ``first``; the caller's transaction makes it all or nothing."""
    check_batch(folder, first, batch)
    await conn.executemany(
        "INSERT INTO events (session_id, seq, type, time, kind, data, surface_op, "
        "source_event_seqs) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            (
                key,
                first + i,
                _enc(v.type),
                v.time,
                event_kind(v.type, v.data, v.surface_op is not None),
                v.data_json,
                None if v.surface_op is None else _encode_op(v.surface_op),
                None if v.source_event_seqs is None else _encode_seqs(v.source_event_seqs),
            )
            for i, v in enumerate(batch)
        ),
    )
    return [
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


def _encode_op(op: SurfaceOp) -> str:
    return json.dumps(surface_op_to_json(op), separators=(",", ":"))


_APPEND_JSON = '"append"'


def _decode_op(text: str) -> SurfaceOp:
    if text == _APPEND_JSON:
        return "append"
    op = surface_op_from_json(json.loads(text))
    if op is None:
        raise InvalidEventError("a stored surface event has no surface_op")
    return op


def _encode_seqs(seqs: Sequence[int]) -> str:
    return json.dumps(list(seqs), separators=(",", ":"))


def _decode_seqs(text: str) -> tuple[int, ...]:
    seqs = json.loads(text)
    if not isinstance(seqs, list) or not all(
        isinstance(s, int) and not isinstance(s, bool) for s in seqs
    ):
        raise InvalidEventError(f"stored source_event_seqs {text!r} are not a list of seqs")
    return tuple(seqs)
