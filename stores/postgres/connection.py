"""The PostgreSQL store's connection: the pool, the store's state, and the plumbing every
operation runs through (one transaction on a pooled connection; a read retried once on a
fresh one; lock waits named; a server's error made one line a user reads).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NoReturn, TypeVar

import asyncpg

from core.config import PostgresLimits
from core.damage import DamagedRow
from core.display import single_line
from core.errors import DiskFullError, SessionNotFoundError, SessionReadOnlyError, StoreError
from core.jsoncodec import loads_exact
from core.limits import MAX_CWD_BYTES
from core.log import Event, SessionHeader, SurfaceOp, SurfaceRow, build_event
from stores.columns import (
    APPEND_JSON,
    decode_op,
    decode_seqs,
    decode_surface_rows,
    decode_text,
    encode_text,
)
from stores.postgres.limits import AppliedLimits, apply_limits
from stores.postgres.location import PgLocation, connect_error
from stores.postgres.pooling import CHANGES_SEQUENCE, ChangePoller, looks_like_pooler
from stores.postgres.rows import read_text, within

T = TypeVar("T")


# The driver logs what it retries by itself (a pool reconnecting after a restart) with a
# traceback; with no logging set up, Python would print that on stderr (over the app, or
# after a command's one clear line). A host that sets up logging still gets it.
logging.getLogger("asyncpg").addHandler(logging.NullHandler())


CHANGES_CHANNEL = "dsh_changes"
"""Every write transaction notifies this channel (delivered on commit) with the writing
store's own token, so each store counts the commits of the others without polling; it
also bumps the ``dsh_changes`` sequence, which stores behind a pooler poll."""
_BUMP = f"nextval('{CHANGES_SEQUENCE}')"


_CONNECT_TIMEOUT_S = 10.0
_POOL_MAX = 2  # operations are serialised; a spare connection covers a broken one


_CWD_WITHIN = within("cwd", MAX_CWD_BYTES)
# The session row of ``$1`` (an id): the digest finds it in the index, the id confirms it.
_BY_ID = "sha256(id) = sha256($1::bytea) AND id = $1::bytea"


# The server closed the connection (terminated, restarted, failed over).
_CONNECTION_LOST = (
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.AdminShutdownError,
    asyncpg.CannotConnectNowError,
    ConnectionResetError,
    BrokenPipeError,
    # The driver lost track of a connection the server dropped under it (seen during a
    # server's shutdown): the connection is thrown away, as a lost one.
    asyncpg.InternalClientError,
)


def _lost_cause(err: BaseException) -> BaseException | None:
    """The lost connection behind ``err`` (itself, or what it was raised while handling),
    or ``None`` when the connection was not lost."""
    seen: BaseException | None = err
    for _ in range(5):
        if seen is None:
            return None
        if isinstance(seen, _CONNECTION_LOST):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


async def _no_reset(conn: asyncpg.Connection) -> None:
    return None


_POOL_SETTINGS = {"application_name": "dsh"}
"""What a pooled connection sends at its start; its time limits are set just after
(``stores.postgres.limits``: an admin's stricter ones win, which startup parameters would hide)."""

_AS_THE_SERVER_SAYS = {"client_encoding": "UTF8"}
"""Sent after the driver's own ``'utf-8'`` (the same encoding, spelt otherwise): a pooler
compares the words with the server's and, when they differ, sets the encoding again before
every transaction it hands over (PgBouncer: a ``SET`` per transaction)."""


def _server_settings(limits: PostgresLimits) -> dict[str, str]:
    """What every connection of a store sets at its start (``PostgresLimits``): a statement
    waits at most ``lock_timeout`` for another connection's lock and runs at most
    ``statement_timeout``; a transaction left idle (a client stopped mid-way) is ended
    after the statement timeout, so it holds no lock longer than that."""
    statement = f"{max(1, round(limits.statement_timeout * 1000))}ms"
    return {
        "application_name": "dsh",
        "lock_timeout": f"{max(1, round(limits.lock_timeout * 1000))}ms",
        "statement_timeout": statement,
        "idle_in_transaction_session_timeout": statement,
    }


async def _init_connection(applied: AppliedLimits, conn: asyncpg.Connection) -> None:
    """Per connection: its time limits (dsh's, or an admin's stricter ones), and, when the
    server knows it (PostgreSQL 14+), a check every few seconds during a long statement
    that the client is still there, so a killed dsh does not leave its query running (a
    search of a huge term, a wait on a lock) until it ends."""
    await apply_limits(conn, applied)
    if conn.get_server_version() >= (14, 0):
        await conn.execute(f"SET client_connection_check_interval = {_CLIENT_CHECK_MS}")


_CLIENT_CHECK_MS = 2000
_LOCK_PROBE_AFTER_S = 1.0
"""A statement waiting this long (a third of ``lock_timeout`` when that is shorter, so the
answer comes while it still waits) has the holders of what it waits for looked up."""
_LOCK_PROBE_EVERY_S = 2.0
_BLOCKERS_SQL = (
    "SELECT DISTINCT usename FROM pg_stat_activity "
    "WHERE pid = ANY (pg_blocking_pids($1)) AND usename IS NOT NULL ORDER BY 1"
)


class _Later:
    """A coroutine started after ``delay`` seconds unless cancelled first: the cost of a
    timer for what is almost always cancelled (a lock probe for a statement that did not
    wait), a task only for what runs."""

    __slots__ = ("_handle", "_task")

    def __init__(self, delay: float, start: Callable[[], Awaitable[None]]) -> None:
        self._task: asyncio.Future[None] | None = None

        def begin() -> None:
            self._task = asyncio.ensure_future(start())
            self._task.add_done_callback(_consume)

        self._handle = asyncio.get_running_loop().call_later(delay, begin)

    def cancel(self) -> None:
        self._handle.cancel()
        if self._task is not None:
            self._task.cancel()


def _roles(names: Sequence[str]) -> str:
    """``role bob`` / ``roles bob, carol`` (escaped: a role name is anyone's choice)."""
    shown = ", ".join(single_line(name, 63) for name in names[:5])
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return f"{'role' if len(names) == 1 else 'roles'} {shown}{more}"


def _pooler_said(err: BaseException) -> bool:
    """Whether ``err`` (or what caused it) is a transaction pooler's refusal."""
    seen: BaseException | None = err
    while seen is not None:
        if looks_like_pooler(seen):
            return True
        seen = seen.__cause__
    return False


def _consume(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


class PgConnection:
    """The state of a ``PostgresSessionStore`` and the plumbing its operations share."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        location: PgLocation,
        limits: PostgresLimits | None = None,
        *,
        pooled: bool = False,
    ) -> None:
        """Internal: use :meth:`open`, which connects and migrates."""
        self._pool: asyncpg.Pool | None = pool
        self._location = location
        self._limits = limits or PostgresLimits()
        self._applied = AppliedLimits(self._limits)  # the limits the server applies
        # Behind a transaction pooler (stores.postgres.pooling): settings per transaction
        # (``_local_sql``, set at open), and other writers followed by polling.
        self._pooled = pooled
        self._local_sql = ""
        self._poller = ChangePoller()
        self._bumps = 0  # this store's own bumps of dsh_changes (its committed writes)
        self._poll_lost = False
        # One operation at a time, in call order (as the SQLite store): a read issued after
        # a write sees it, even when the writer's caller was cancelled meanwhile.
        self._lock = asyncio.Lock()
        self._running: set[asyncio.Future[Any]] = set()
        # Change tracking: a LISTEN connection counts other stores' commits.
        self._token = uuid.uuid4().hex
        self._others = 0
        self._listener: asyncpg.Connection | None = None
        self._listener_lost = False
        self._listen_lock = asyncio.Lock()
        self._notice: tuple[str, bool] | None = None
        self._outage_told = False
        # Whole listings keyed by the snapshot they were read in (see ``_listing``).
        self._listings: dict[str, tuple[str, Any]] = {}
        self._user = ""  # the connecting role (``current_user``), read at open
        self._migration_progress: Callable[[int, int], None] | None = None
        self._index_progress: Callable[[int, int], None] | None = None
        # What the latest listings skipped (``damaged_rows``).
        self._damaged_sessions: tuple[DamagedRow, ...] = ()
        self._damaged_titles: tuple[DamagedRow, ...] = ()

    @property
    def location(self) -> str:
        """The server and database, without the password (for messages)."""
        return self._location.display

    # ------------------------------------------------------------------ plumbing

    def _live(self) -> asyncpg.Pool:
        if self._pool is None:
            raise StoreError(f"{self.location}: the store is closed")
        return self._pool

    async def _run(
        self,
        body: Callable[[asyncpg.Connection], Awaitable[T]],
        *,
        write: bool,
        what: str | None = None,
        isolation: str | None = "read_committed",
    ) -> T:
        """Run ``body`` in one transaction on a pooled connection (``isolation=None``: a
        body of one statement, atomic on its own, that notifies by itself if it writes).

        Once started, a write's transaction runs to its end (commit or rollback) even if
        the caller is cancelled, so a batch is stored whole or not at all. A read's caller
        cancelled cancels its statement in the server too (asyncpg sends the cancel
        request; the transaction is rolled back), so a search nobody waits for any more
        stops costing the server at once.
        """
        pool = self._live()
        await self._lock.acquire()
        try:
            task = asyncio.ensure_future(self._transaction(pool, body, write, what, isolation))
        except BaseException:
            self._lock.release()
            raise
        self._running.add(task)
        task.add_done_callback(self._finished)
        if not write:
            return await task
        return await asyncio.shield(task)

    def _finished(self, task: asyncio.Future[Any]) -> None:
        self._running.discard(task)
        self._lock.release()
        _consume(task)

    async def _transaction(
        self,
        pool: asyncpg.Pool,
        body: Callable[[asyncpg.Connection], Awaitable[T]],
        write: bool,
        what: str | None,
        isolation: str | None,
    ) -> T:
        # A body of one statement (``isolation=None``) notifies and bumps by itself.
        notify = write and isolation is not None
        if self._pooled:
            # Behind a pooler a statement runs in a transaction (parse and execution on
            # one server connection).
            isolation = isolation or "read_committed"
        for attempt in (1, 2):
            blockers: list[str] = []
            try:
                async with pool.acquire() as conn:
                    # Nothing but a timer unless the statement waits (see _watch_locks);
                    # behind a pooler the pid is the pooler's: nobody to look up.
                    watch = None
                    if not self._pooled:
                        watch = _Later(
                            min(_LOCK_PROBE_AFTER_S, self._limits.lock_timeout / 3),
                            functools.partial(self._watch_locks, pool, conn, blockers),
                        )
                    try:
                        if isolation is None:
                            return await body(conn)
                        async with conn.transaction(isolation=isolation):
                            if self._local_sql:
                                await conn.execute(self._local_sql)
                            result = await body(conn)
                            if notify:
                                await conn.execute(
                                    f"SELECT pg_notify($1, $2), {_BUMP}",
                                    CHANGES_CHANNEL,
                                    self._token,
                                )
                        if notify:
                            self._bumps += 1
                        return result
                    except asyncpg.InternalClientError:
                        conn.terminate()  # never handed out again
                        raise
                    finally:
                        if watch is not None:
                            watch.cancel()
            except _CONNECTION_LOST as err:
                # A read on a connection the server dropped (a restart, a failover) is
                # tried once more on a fresh one; a write is not (it may have committed).
                if write or attempt == 2:
                    raise connect_error(self._location, err, what or "lost the connection") from err
            except asyncpg.PostgresError as err:
                # A cancel request meant for an earlier, cancelled read can reach the
                # server after that read ended and stop the next statement of the
                # connection: a read so stopped is tried once more (not one the
                # statement timeout stopped, nor a write, which may have committed).
                if (
                    isinstance(err, asyncpg.QueryCanceledError)
                    and not write
                    and attempt == 1
                    and "statement timeout" not in str(err)
                ):
                    continue
                raise self._error(
                    what or ("write failed" if write else "read failed"), err, blockers
                ) from err
            except asyncpg.InterfaceError as err:
                # A connection lost inside a transaction surfaces as the rollback's
                # complaint that the connection is closed: the loss is what happened.
                lost = _lost_cause(err)
                if lost is None:
                    raise connect_error(
                        self._location, err, what or "the connection failed"
                    ) from err
                if write or attempt == 2:
                    raise connect_error(
                        self._location, lost, what or "lost the connection"
                    ) from err
            except (OSError, TimeoutError) as err:
                raise connect_error(self._location, err, what or "the connection failed") from err
        raise AssertionError("unreachable")

    async def _watch_locks(
        self, pool: asyncpg.Pool, conn: asyncpg.Connection, blockers: list[str]
    ) -> None:
        """While ``conn``'s statement waits longer than a moment, learn from the server
        which roles hold the locks it waits for (``pg_blocking_pids``; every role may read
        who a backend is), so that a lock timeout names them, and tell the user (the
        notice line) that dsh is waiting on them."""
        pid = conn.get_server_pid()
        while True:
            try:
                async with pool.acquire(timeout=_LOCK_PROBE_AFTER_S) as probe:
                    try:
                        rows = await probe.fetch(_BLOCKERS_SQL, pid, timeout=_LOCK_PROBE_AFTER_S)
                    except BaseException:
                        # Stopped before its answer (the statement it watched ended, or
                        # its own timeout on a busy server): the connection may be left
                        # mid-statement (the next transaction on it failed with "SET
                        # TRANSACTION ISOLATION LEVEL must be called before any query",
                        # issue 34), so it is closed, never handed to the next operation.
                        probe.terminate()
                        raise
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
                return  # the names are a courtesy: the timeout itself still comes
            names = [str(row[0]) for row in rows]
            if names and names != blockers:
                blockers[:] = names
                self._notice = (
                    f"Waiting for a lock held by {_roles(names)} on {self.location}…",
                    True,
                )
            await asyncio.sleep(_LOCK_PROBE_EVERY_S)

    def _error(
        self, what: str, err: asyncpg.PostgresError, blockers: Sequence[str] = ()
    ) -> StoreError:
        """The one translation of a server error into the ``StoreError`` a user reads."""
        state = getattr(err, "sqlstate", "") or ""
        # The server's primary message only, on one line: str(err) adds DETAIL/HINT lines.
        said = single_line(getattr(err, "message", None) or str(err), 200)
        if state == "53100":  # disk_full
            return DiskFullError(f"{self.location}: {what}: the server's disk is full ({said})")
        if state == "25006":  # read_only_sql_transaction
            return StoreError(f"{self.location}: the database is read-only ({said})")
        if state == "55P03":  # lock_not_available: lock_timeout ran out
            held = _roles(blockers) if blockers else "another connection"
            return StoreError(
                f"{self.location}: {what}: waited {self._applied.seconds('lock_timeout'):g} s "
                f"for a lock held by {held} ({self._applied.words('lock_timeout')}); try "
                "again when it is released"
            )
        if state == "57014" and "statement timeout" in said:  # query_canceled
            return StoreError(
                f"{self.location}: {what}: the statement ran longer than "
                f"{self._applied.seconds('statement_timeout'):g} s and the server stopped it "
                f"({self._applied.words('statement_timeout')})"
            )
        return connect_error(self._location, err, what)

    async def _require_session(
        self, conn: asyncpg.Connection, sid: str
    ) -> tuple[int, SessionHeader]:
        """The key and header of a session this role may read (row security hides the
        others: they are ``SessionNotFoundError``, as a deleted one). A header that cannot
        be read (another member's hand-written row) is a ``StoreError`` saying why."""
        row = await conn.fetchrow(
            f"SELECT key, created_at, {_CWD_WITHIN}, owner FROM dsh_sessions WHERE {_BY_ID}",
            encode_text(sid),
        )
        if row is None:
            raise SessionNotFoundError(sid)
        key, created_at, raw_cwd, cwd_size, owner = row
        try:
            cwd = None if cwd_size is None else read_text(raw_cwd, cwd_size, MAX_CWD_BYTES, "cwd")
        except ValueError as err:
            raise StoreError(
                f"{self.location}: session {single_line(sid, 60)} is damaged ({err})"
            ) from None
        return key, SessionHeader(id=sid, created_at=created_at, cwd=cwd, owner=owner)

    async def _refuse(self, conn: asyncpg.Connection, sid: str) -> NoReturn:
        """A write found no session it may write: read-only when this role may read it
        (shared with it), else not found (whether it exists is none of its business)."""
        header = (await self._require_session(conn, sid))[1]
        raise SessionReadOnlyError(sid, header.owner or "")

    async def _require_own(self, conn: asyncpg.Connection, sid: str) -> tuple[int, SessionHeader]:
        """The key and header of a session this role owns (else ``_refuse``)."""
        key, header = await self._require_session(conn, sid)
        if header.owner != self._user:
            raise SessionReadOnlyError(sid, header.owner or "")
        return key, header

    def _decode_events(self, rows: list[Any]) -> list[Event]:
        out: list[Event] = []
        append = out.append
        types: dict[bytes, str] = {}
        loads = loads_exact
        build = build_event
        try:
            for i, (seq, raw_type, time, data, surface_op, source_seqs) in enumerate(rows):
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
                append(build(seq, type_, time, loads(data), op, seqs))
                rows[i] = None
        except (ValueError, TypeError) as err:
            raise StoreError(f"{self.location}: a stored event is corrupt ({err})") from err
        return out

    def _decode_surface_rows(self, rows: list[Any]) -> list[SurfaceRow]:
        return decode_surface_rows(rows, self.location)
