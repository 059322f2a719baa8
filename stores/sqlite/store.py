"""``SqliteSessionStore``: the durable ``SessionStore`` on one SQLite file, composed of
the mixins of its concerns (see the package's docstring); opening it lives here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import aiosqlite

from core.config import default_database_path
from core.damage import DamagedRow
from core.errors import DiskFullError, StoreError
from core.log import SessionHeader
from core.query import SessionTitle
from stores.progress import indexing_words, terminal_progress
from stores.sharing import check_user, os_user
from stores.sqlite.connection import (
    _BUSY_TIMEOUT_S,
    _connect_target,
    _file_is_read_only,
    _size,
    _store_error,
    _worker_stopped,
)
from stores.sqlite.leases import _LeasesMixin
from stores.sqlite.listing import _ListingMixin
from stores.sqlite.reads import _ReadsMixin
from stores.sqlite.schema import _SchemaMixin
from stores.sqlite.search import _SearchMixin
from stores.sqlite.sharing import _SharingMixin
from stores.sqlite.surfaces import _SurfacesMixin
from stores.sqlite.writes import _WritesMixin

__all__ = ["SqliteSessionStore"]


class SqliteSessionStore(
    _SchemaMixin,
    _WritesMixin,
    _LeasesMixin,
    _SharingMixin,
    _ReadsMixin,
    _SurfacesMixin,
    _ListingMixin,
    _SearchMixin,
):
    """A ``SessionStore`` on one SQLite file; create it with ``await SqliteSessionStore.open(path)``."""

    def __init__(
        self, conn: aiosqlite.Connection, path: Path, *, read_only: bool, user: str | None = None
    ) -> None:
        """Internal: use :meth:`open`, which configures and migrates the connection."""
        self._user = os_user() if user is None else check_user(user)
        self._readers = (self._user, self._user)  # the parameters of ``_readable``
        self._damaged: tuple[DamagedRow, ...] = ()  # what the latest listing skipped
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
        self._upgraded = False  # whether this store migrated the file (``_tidy`` then runs)
        self._listings: dict[str, tuple[tuple[int, int], Any]] = {}
        self._migration_progress: Callable[[int, int], None] | None = None
        self._index_progress: Callable[[int, int], None] | None = None

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        read_only: bool = False,
        busy_timeout: float = _BUSY_TIMEOUT_S,
        progress: Callable[[int, int], None] | None = None,
        user: str | None = None,
        fold_progress: Callable[[int, int], None] | None = None,
    ) -> SqliteSessionStore:
        """Open (creating and migrating when needed) the database at ``path``
        (default: :func:`stores.default_database_path`).

        An upgrade that must fold many surface rows reports ``fold_progress(done, total)``
        along the way (rows); without ``fold_progress``, on a terminal, a line on stderr
        (see ``stores.progress.terminal_progress``).

        A file without write permission opens read-only, as does ``read_only=True``: reads
        work and writes raise ``StoreError``. A file that is not a dsh database, is
        corrupt, or has a newer schema raises ``StoreError``.

        When the disk is full, a WAL database cannot even be read the normal way (SQLite
        must create and size its ``-shm`` file): it is then opened read-only instead
        (see :meth:`_open_when_full`), ``read_only_reason`` says why, and every write
        raises ``DiskFullError``.

        ``user`` is who the store acts as (default: the OS user): the owner of the
        sessions it creates, who sees only their own and those shared with them.
        A database written before the search index existed has its sessions indexed
        here, and one whose index predates schema v7 has it rebuilt; ``progress``
        (sessions done, sessions in all) follows either.
        """
        db_path = Path(path) if path is not None else default_database_path()
        if not read_only and _file_is_read_only(db_path):
            read_only = True
        index_progress = progress or terminal_progress(indexing_words)
        try:
            store = await cls._connect(
                db_path,
                read_only,
                busy_timeout,
                progress=fold_progress,
                index_progress=index_progress,
                user=user,
            )
        except DiskFullError as err:
            if read_only or not db_path.is_file():
                raise
            return await cls._open_when_full(db_path, busy_timeout, err, user)
        try:
            await store._index_pending(index_progress)
        except BaseException:
            with contextlib.suppress(Exception):
                await store.close()
            raise
        return store

    @classmethod
    async def _open_when_full(
        cls, db_path: Path, busy_timeout: float, err: DiskFullError, user: str | None = None
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
                store = await cls._connect(db_path, True, busy_timeout, options, user=user)
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
        cls,
        db_path: Path,
        read_only: bool,
        busy_timeout: float,
        options: str = "mode=ro",
        *,
        progress: Callable[[int, int], None] | None = None,
        index_progress: Callable[[int, int], None] | None = None,
        user: str | None = None,
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
        store = cls(conn, db_path, read_only=read_only, user=user)
        store._migration_progress = progress or terminal_progress()
        store._index_progress = index_progress
        try:
            await store._setup(busy_timeout)
        except BaseException:
            with contextlib.suppress(Exception):
                await conn.close()
            store._conn = None
            raise
        return store

    async def __aenter__(self) -> SqliteSessionStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
