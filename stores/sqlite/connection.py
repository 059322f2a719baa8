"""The SQLite store's connection: opening it (read-only when it must), SQLite's errors
named for the user (a full disk, a read-only file, a corrupt one), busy retries, and
the serialised transactions every operation runs in.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import threading
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from core.errors import DiskFullError, StoreError
from stores.sqlite.tidy import _tidy

if TYPE_CHECKING:  # loaded by the async store only (``stores.sqlite.oneshot`` reads without them)
    import asyncio

    import aiosqlite

T = TypeVar("T")


_BUSY_TIMEOUT_S = 10.0
# How long a write keeps retrying an SQLITE_BUSY that escaped the busy handler.
_RETRY_WINDOW_S = 30.0


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
    # A database dsh creates is its user's alone; SQLite gives its -wal and -shm files the
    # database's mode. (An empty file is an empty database; an existing one is left as is.)
    with contextlib.suppress(OSError):  # it exists, or SQLite names what is wrong
        os.close(os.open(db_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
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


async def _worker_stopped(connection: aiosqlite.Connection) -> None:
    """Wait for the worker thread of a connection that failed to open.

    aiosqlite queues its stop and returns without waiting. If the caller's event loop
    closed first (a CLI run ending on the error), the thread died reporting to that closed
    loop, printing a traceback."""
    import asyncio

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


class _Connection:
    """The connection and its transactions: one at a time (an ``asyncio.Lock``), each
    run to its end, a busy database retried, SQLite's errors named for the user."""

    _conn: aiosqlite.Connection | None
    _path: Path
    _read_only: bool
    _read_only_reason: str | None
    _lock: asyncio.Lock
    _writes: int
    _upgraded: bool

    async def _retry_busy(self, op: Callable[[], Awaitable[T]]) -> T:
        import asyncio

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

    async def close(self) -> None:
        """Close the connection once running operations finish (idempotent). A store
        that wrote first tidies the file (``_tidy``: bounded work, skipped when another
        connection is writing)."""
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                try:
                    if not self._read_only:
                        # Optional: a connection that cannot tidy still closes.
                        with contextlib.suppress(sqlite3.Error, ValueError):
                            await conn._execute(_tidy, conn._conn, self._upgraded)  # type: ignore[no-untyped-call]
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
        return await self._serialised(lambda: self._transaction(body, write), write)

    def _check_writable(self, write: bool) -> None:
        if write and self._read_only:
            if self._read_only_reason is not None:
                raise DiskFullError(
                    f"{self._path}: nothing can be written: {self._read_only_reason}; "
                    "free some space and try again"
                )
            raise StoreError(f"{self._path}: the database is opened read-only")

    async def _serialised(self, transaction: Callable[[], Awaitable[T]], write: bool) -> T:
        import asyncio

        self._check_writable(write)
        await self._lock.acquire()
        try:
            task = asyncio.ensure_future(transaction())
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

    async def _run_sync(
        self, body: Callable[[sqlite3.Connection], T], *, write: bool, begin: bool = True
    ) -> T:
        """Like :meth:`_run`, but ``body`` is plain ``sqlite3`` code run with the whole
        transaction (BEGIN, body, COMMIT) in one call on the connection's worker thread:
        one hand-over between threads instead of one per statement, and the CPU work
        (encoding, decoding) off the event loop.

        It needs no task of its own (``_run`` does): that one call runs to its end
        (commit or rollback) even if the caller is cancelled meanwhile, and whatever is
        queued on the thread after it runs after it, so the lock may be let go as soon as
        the caller stops waiting. (A task, a shield and their callbacks cost a few turns
        of the event loop per call: a good part of a small read.)

        ``begin=False`` is for a read whose ``body`` runs a single statement (an implicit
        transaction of its own) or begins a transaction itself (committed after it)."""
        self._check_writable(write)
        async with self._lock:
            return await self._transaction_sync(body, write, begin)

    async def _transaction_sync(
        self, body: Callable[[sqlite3.Connection], T], write: bool, begin: bool = True
    ) -> T:
        conn = self._live()
        # aiosqlite has no public way to run a function on its thread: its ``_execute``
        # (and ``_conn``, the sqlite3 connection that thread owns) are used instead.
        raw: sqlite3.Connection = conn._conn

        def transaction() -> list[T]:
            if begin:
                raw.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                result = body(raw)
                if begin or raw.in_transaction:
                    raw.execute("COMMIT")
            except BaseException:
                if begin or raw.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        raw.execute("ROLLBACK")
                raise
            # In a box the caller empties: aiosqlite's worker keeps the last value it
            # returned until its next call, which would hold a large read's events.
            return [result]

        async def attempt() -> T:
            try:
                box: list[T] = await conn._execute(transaction)  # type: ignore[no-untyped-call]
                return box.pop()
            finally:
                if write:
                    self._writes += 1

        try:
            return await self._retry_busy(attempt)
        except sqlite3.Error as err:
            raise self._error("write failed" if write else "read failed", err) from err
