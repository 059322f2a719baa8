"""``PostgresSessionStore``: the ``SessionStore`` on a PostgreSQL server, made of one part
per concern (``stores.postgres``' modules), opened, migrated and closed here.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable
from types import TracebackType
from typing import Any

import asyncpg

from core.config import PostgresLimits
from core.errors import StoreError
from stores.postgres.connection import (
    _AS_THE_SERVER_SAYS,
    _CLIENT_CHECK_MS,
    _CONNECT_TIMEOUT_S,
    _POOL_MAX,
    _POOL_SETTINGS,
    _init_connection,
    _no_reset,
    _pooler_said,
)
from stores.postgres.leases import Leases
from stores.postgres.limits import LIMIT_NAMES, AppliedLimits, pooled_limits
from stores.postgres.listen import ChangeTracking
from stores.postgres.location import PgLocation, connect_error
from stores.postgres.pooling import local_settings_sql, split_server_settings
from stores.postgres.reads import Reads
from stores.postgres.schema import Migrations
from stores.postgres.search import Search
from stores.postgres.sharing import Sharing
from stores.postgres.writes import Writes
from stores.progress import indexing_words, terminal_progress

CHUNK_FLUSH_SECONDS = 0.25
"""How long a streamed reply's chunks are gathered before one write (see
``PostgresSessionStore.chunk_flush_seconds``)."""


async def _current_user(conn: asyncpg.Connection) -> str:
    return str(await conn.fetchval("SELECT current_user"))


class PostgresSessionStore(Migrations, ChangeTracking, Writes, Reads, Search, Leases, Sharing):
    """A ``SessionStore`` on PostgreSQL; create it with ``await PostgresSessionStore.open(url)``."""

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        progress: Callable[[int, int], None] | None = None,
        fold_progress: Callable[[int, int], None] | None = None,
        limits: PostgresLimits | None = None,
    ) -> PostgresSessionStore:
        """Connect to the server named by ``url`` (``postgresql://user@host:port/db``, libpq
        query options such as ``host=/run/postgresql`` for a socket) and create or migrate
        dsh's tables. A server that is down, refuses the login, or holds a newer schema
        raises one ``StoreError`` line naming host and database, never the password.
        Sessions written before the search index existed are indexed here; ``progress``
        (sessions done, sessions in all) follows that.

        An upgrade that must fold many surface rows reports ``fold_progress(done, total)``
        (rows); without ``fold_progress``, on a terminal, a line on stderr
        (``stores.progress.terminal_progress``).

        Every statement runs under ``limits`` (``lock_timeout``, ``statement_timeout``;
        the config's ``[postgres]``): waiting on another connection's lock, or a statement
        gone wrong, ends in one clear error instead of a hang."""
        location = PgLocation.parse(url)
        limits = limits or PostgresLimits()
        if not limits.pooler:
            try:
                return await cls._open(location, limits, progress, fold_progress, pooled=False)
            except StoreError as err:
                # A transaction pooler (PgBouncer) refuses a startup parameter of the URL
                # (``?search_path=``), or loses prepared statements: go on as behind one,
                # without a word. (One that lets them through is found by its process id,
                # ``_behind_a_proxy``.)
                if not _pooler_said(err):
                    raise
        return await cls._open(location, limits, progress, fold_progress, pooled=True)

    @classmethod
    async def _open(
        cls,
        location: PgLocation,
        limits: PostgresLimits,
        progress: Callable[[int, int], None] | None,
        fold_progress: Callable[[int, int], None] | None,
        *,
        pooled: bool,
    ) -> PostgresSessionStore:
        applied = AppliedLimits(limits)
        # The URL's own settings go to the server, except time limits: dsh's win over
        # those (an admin's stricter ones win over dsh's: stores.postgres.limits).
        dsn, from_url = split_server_settings(location.dsn)
        for name in LIMIT_NAMES:
            from_url.pop(name, None)
        settings = {**from_url, **_POOL_SETTINGS}
        # Direct: the limits are set as each connection starts (``_init_connection``).
        options: dict[str, Any] = {"init": functools.partial(_init_connection, applied)}
        startup = settings
        if pooled:
            # Only what PgBouncer forwards goes at startup; the URL's settings are set per
            # transaction (with the limits: ``_local_settings``), and no prepared statement
            # outlives one.
            settings = from_url
            options = {"statement_cache_size": 0}
            startup = {**_POOL_SETTINGS, **_AS_THE_SERVER_SAYS}
        try:
            pool = await asyncpg.create_pool(
                dsn,
                min_size=1,
                max_size=_POOL_MAX,
                timeout=_CONNECT_TIMEOUT_S,
                command_timeout=None,
                server_settings=startup,
                # Every operation is a whole transaction that leaves no session state, so
                # the pool's reset query (a round trip per operation) is not needed.
                reset=_no_reset,
                **options,
            )
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as err:
            raise connect_error(location, err) from err
        store = cls(pool, location, limits, pooled=pooled)
        store._applied = applied
        store._migration_progress = fold_progress or terminal_progress()
        store._index_progress = progress or terminal_progress(indexing_words)
        try:
            if not pooled and await store._behind_a_proxy(pool):
                await store.close()
                return await cls._open(location, limits, progress, fold_progress, pooled=True)
            if pooled:
                store._local_sql = await store._local_settings(pool, settings)
            await store._migrate()
            store._user = await store._run(_current_user, write=False)
            if pooled:
                await store.change_token()  # the counter as it is now: only later changes count
            # A direct store opens its LISTEN connection at its first ``change_token``: only
            # a host that follows other writers (the app) asks, and a one-shot command (``dsh
            # send``, ``dsh show``) then makes one connection to the server, not two.
        except BaseException:
            await store.close()
            raise
        return store

    async def _behind_a_proxy(self, pool: asyncpg.Pool) -> bool:
        """Whether something stands between dsh and the server: a pooler answers the
        connection with a cancel key of its own, so the process id it gave is not the
        server process that runs the statements (PgBouncer in any mode, pgpool, Odyssey).
        Such a connection is treated as pooled: correct in every pooling mode."""
        try:
            async with pool.acquire() as conn:
                return bool(await conn.fetchval("SELECT pg_backend_pid()") != conn.get_server_pid())
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as err:
            raise connect_error(self._location, err) from err

    async def _local_settings(self, pool: asyncpg.Pool, settings: dict[str, str]) -> str:
        """The statement that sets ``settings`` for a transaction (and, on a server that
        knows it, the client check of ``_init_connection``)."""
        settings = dict(settings)
        try:
            async with pool.acquire() as conn:
                if conn.get_server_version() >= (14, 0):
                    settings["client_connection_check_interval"] = str(_CLIENT_CHECK_MS)
                settings.update(await pooled_limits(conn, self._applied))
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as err:
            raise connect_error(self._location, err) from err
        try:
            return local_settings_sql(settings)
        except ValueError as err:
            raise StoreError(f"{self.location}: {err}") from None

    @property
    def pooled(self) -> bool:
        """Whether this store works as behind a transaction pooler (set, or found)."""
        return self._pooled

    async def __aenter__(self) -> PostgresSessionStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close once running operations finish (idempotent)."""
        pool, self._pool = self._pool, None
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(Exception):
                await listener.close(timeout=5)
        if pool is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(pool.close(), 10)

    @property
    def read_only(self) -> bool:
        return False

    def current_user(self) -> str:
        """The role this store connects as (``current_user``): it owns what it creates."""
        return self._user

    @property
    def read_only_reason(self) -> str | None:
        return None

    def chunk_flush_seconds(self) -> float:
        """How long the engine gathers a streamed reply's chunks before writing them
        (``core.engine.chunk_flush_seconds``): every write here is a round trip, a row
        lock on the session and a notification that wakes every member's follower, so a
        reply is written a few times a second rather than twenty (issue 34: with 100
        members streaming, the notifications, not the inserts, were what the server and
        the clients spent their time on). The text is shown as it arrives either way."""
        return CHUNK_FLUSH_SECONDS
