"""``PostgresSessionStore``: the ``SessionStore`` on a PostgreSQL server (asyncpg), for teams.

The same rules as the SQLite store, kept the same way: text the user controls (ids, cwds,
event types) is stored as ``bytea`` of its ``surrogatepass`` UTF-8 (every Python ``str``
round-trips, NUL and lone surrogates included, and byte order is code-point order); event
data is the JavaScript-identical JSON text of ``core.jsoncodec`` in a ``text`` column (not
``jsonb``, which would reorder keys and refuses ``\\u0000``).

Sessions have an integer key; events are keyed ``(session_key, seq)``. Seqs come from the
session row's ``next_seq``: the ``UPDATE`` that reserves them locks that row, so concurrent
appends to one session (any process, any host) queue there and seqs stay contiguous; the
primary key is only the last line of defence. Every operation is one transaction.

asyncpg was chosen over psycopg 3 by measuring both on dsh's append and read shapes
(see the commit that added this file): about 1.5x faster appends and 1.2x faster reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, NoReturn, TypeVar

import asyncpg

from core.batches import EventBatches
from core.config import PostgresLimits
from core.damage import DamagedRow
from core.display import single_line
from core.errors import (
    DiskFullError,
    SessionExistsError,
    SessionNotFoundError,
    SessionReadOnlyError,
    ShareError,
    StoreError,
)
from core.jsoncodec import loads_exact
from core.leases import ReplyLease, check_lease_ttl, lease_blocks
from core.limits import MAX_CWD_BYTES, MAX_SESSION_ID_BYTES
from core.log import (
    KNOWN_EVENT_TYPES,
    SESSION_FORK,
    SESSION_PROFILE,
    SESSION_SOURCE,
    Event,
    NewEvent,
    Replace,
    SessionHeader,
    SurfaceOp,
    SurfaceOutline,
    SurfaceRow,
    ValidatedEvent,
    build_event,
)
from core.query import MessageTail, SessionTitle, TailWalk
from core.references.projection import MessageSums, projection_code
from core.search import (
    RANK_WINDOW,
    SearchHit,
    check_search_limit,
    like_pattern,
    rank_hits,
    search_terms,
)
from core.sharing import Share
from core.surface import SurfaceFolder, fold_surface
from stores.columns import (
    APPEND_JSON,
    decode_op,
    decode_seqs,
    decode_surface_rows,
    decode_text,
    encode_op,
    encode_seqs,
    encode_text,
)
from stores.pglimits import LIMIT_NAMES, AppliedLimits, apply_limits, pooled_limits
from stores.pglocation import PgLocation, connect_error
from stores.pgpairs import MERGE_PAIRS, merge_stored_pairs, pairs_step
from stores.pgpooling import (
    BOUND_SQL,
    CHANGES_SEQUENCE,
    POLL_SQL,
    XMIN_SQL,
    ChangePoller,
    changes_step,
    local_settings_sql,
    looks_like_pooler,
    split_server_settings,
)
from stores.pgrows import (
    HEADERS_SQL,
    IDS_OF_KEYS_SQL,
    LAST_EVENT_TIMES_SQL,
    TITLES_SQL,
    WANTED_SESSIONS,
    build_headers,
    build_latest_events,
    build_titles,
    bytea,
    latest_events_sql,
    read_id,
    read_text,
    within,
)
from stores.pgteam import GROUP_ROLE, REINDEX, REINDEX_SQL, team_step
from stores.progress import indexing_words, terminal_progress
from stores.sharing import check_grantee, check_user
from stores.validation import (
    KIND_LOG,
    KIND_SURFACE,
    batch_has_replace,
    check_batch,
    check_count,
    check_mark_type,
    check_seq_range,
    check_seqs,
    check_session_id,
    check_session_ids,
    event_kind,
    import_header,
    missing_seq_error,
    new_header,
    validate_batch,
    validate_event,
)

__all__ = [
    "CHANGES_CHANNEL",
    "GROUP_ROLE",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "PostgresSessionStore",
    "session_row_security",
]

T = TypeVar("T")

# The driver logs what it retries by itself (a pool reconnecting after a restart) with a
# traceback; with no logging set up, Python would print that on stderr (over the app, or
# after a command's one clear line). A host that sets up logging still gets it.
logging.getLogger("asyncpg").addHandler(logging.NullHandler())

_BACKFILL = "SELECT 'dsh: fold every surface into its nodes'"
"""A migration statement run as Python (``_backfill_surfaces``), a no-op as SQL."""

# ---------------------------------------------------------------- row-level security
#
# Issue 17: every session has an owner (the role that created it, ``current_user``); its
# owner reads and writes it, a role it is shared with (a row of ``dsh_shares``) only reads
# it, and nobody else sees any row of it. The server enforces that on every dsh table with
# row-level security, FORCEd so that the role owning the tables (whoever ran the first
# migration) is held to it too; dsh's roles need neither superuser nor BYPASSRLS.


def grant_to_group(table: str, privileges: str = "SELECT, INSERT, UPDATE, DELETE") -> str:
    """The statement that lets ``GROUP_ROLE`` (if the server has it) use ``table``."""
    return (
        "DO $$ BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname = "
        f"'{GROUP_ROLE}') AND to_regclass('{table}') IS NOT NULL THEN "
        f"GRANT {privileges} ON {table} TO {GROUP_ROLE}; END IF; END $$"
    )


SESSION_OWNER = "session_owner"
"""The column of every session-keyed table naming its session's owner (see below)."""

_SHARED_WITH_ME = "(SELECT session_key, owner FROM dsh_shares WHERE grantee = current_user)"
"""The sessions shared with the connecting role, as ``(key, owner)`` pairs: uncorrelated,
so a policy's ``IN`` reads it at most once per statement (a hashed subplan, built only
when a row the role does not own is met)."""


def session_row_security(
    table: str, key_column: str = "session_key", *, grantees_read: bool = True
) -> tuple[str, ...]:
    """Row-level security for a table whose rows belong to one session (``key_column``
    holds ``dsh_sessions.key``): a row is seen by whoever may read its session (only by
    its owner when not ``grantees_read``) and written only by the session's owner.
    Add a new session-keyed table's policies by appending these statements to the
    migration step that creates it (with its foreign key to ``dsh_sessions`` named
    ``{table}_{key_column}_fkey``, the default name, which they replace).

    Each row names its session's owner (``SESSION_OWNER``: filled by its default, the
    role that inserts it), and the foreign key ``(key, owner)`` makes that the real one
    (as ``dsh_shares`` does), so the policies never look at ``dsh_sessions``: checking
    ``dsh_sessions`` per row (its own policy checking ``dsh_shares`` in turn) made a
    20,000-event read 2.4-3.1x slower than without row security (now 1.2-1.3x for its
    owner: ``python -m tests.benchmarks --only rls``). Rows stored before this step take
    the migrating role, who owns every session then too."""
    owned = f"{SESSION_OWNER} = current_user"
    readable = f"{owned} OR ({table}.{key_column}, {SESSION_OWNER}) IN {_SHARED_WITH_ME}"
    # A row written is checked against the session itself, before any unique index sees
    # it: with the owner column alone, a row keyed on another's session would pass the
    # policy and meet that session's rows in the primary key, and the error ("duplicate
    # key", not the foreign key's) would tell the writer that the session exists.
    writable = (
        f"{owned} AND EXISTS (SELECT 1 FROM dsh_sessions AS s "
        f"WHERE s.key = {table}.{key_column} AND s.owner = current_user)"
    )
    if grantees_read:
        policies: tuple[str, ...] = (
            f"CREATE POLICY dsh_read ON {table} FOR SELECT USING ({readable})",
            f"CREATE POLICY dsh_insert ON {table} FOR INSERT WITH CHECK ({writable})",
            f"CREATE POLICY dsh_update ON {table} FOR UPDATE "
            f"USING ({owned}) WITH CHECK ({writable})",
            f"CREATE POLICY dsh_delete ON {table} FOR DELETE USING ({owned})",
        )
    else:
        policies = (f"CREATE POLICY dsh_owner ON {table} USING ({owned}) WITH CHECK ({writable})",)
    return (
        f"ALTER TABLE {table} ADD COLUMN {SESSION_OWNER} text NOT NULL DEFAULT current_user",
        # A role that bypasses row security (a superuser importing another's session, as
        # `dsh migrate` does, or indexing another's messages) writes rows of sessions it
        # does not own: those take the session's owner. Nobody else pays for the trigger.
        f"CREATE TRIGGER dsh_session_owner BEFORE INSERT ON {table} "
        f"FOR EACH ROW WHEN (NOT row_security_active('{table}')) "
        f"EXECUTE FUNCTION dsh_session_owner('{key_column}')",
        f"ALTER TABLE {table} DROP CONSTRAINT {table}_{key_column}_fkey",
        f"ALTER TABLE {table} ADD CONSTRAINT {table}_{SESSION_OWNER}_fkey "
        f"FOREIGN KEY ({key_column}, {SESSION_OWNER}) REFERENCES dsh_sessions (key, owner) "
        "ON DELETE CASCADE ON UPDATE CASCADE",
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
        f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
        *policies,
        grant_to_group(
            table, "SELECT, INSERT, UPDATE, DELETE" if grantees_read else "SELECT, INSERT, DELETE"
        ),
    )


def owners_and_shares() -> tuple[str, ...]:
    """The migration step of issue 17: owners, ``dsh_shares`` and the policies.

    A share row names the session's owner too, and the foreign key ``(session_key,
    owner)`` makes it the real one: nobody can forge a grant on another's session, and the
    sessions policy can check grants without reading ``dsh_sessions`` from ``dsh_shares``'s
    own policy (which would recurse). Existing sessions go to the role that migrates."""
    return (
        "ALTER TABLE dsh_sessions ADD COLUMN owner text NOT NULL DEFAULT current_user",
        "ALTER TABLE dsh_sessions ADD CONSTRAINT dsh_sessions_key_owner UNIQUE (key, owner)",
        """
        CREATE TABLE dsh_shares (
            session_key bigint NOT NULL,
            owner       text   NOT NULL DEFAULT current_user,
            grantee     text   NOT NULL CHECK (grantee <> ''),
            -- The owner is in the key so that a forged row (another owner: refused by
            -- the foreign key at the end of the statement) never meets a real one in
            -- the index first, which would tell the forger that the grant exists.
            PRIMARY KEY (session_key, owner, grantee),
            FOREIGN KEY (session_key, owner) REFERENCES dsh_sessions (key, owner)
                ON DELETE CASCADE ON UPDATE CASCADE
        )
        """,
        "CREATE INDEX dsh_shares_by_grantee ON dsh_shares (grantee, session_key)",
        # session_row_security's trigger: the owner of the session a row belongs to.
        """
        CREATE FUNCTION dsh_session_owner() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.session_owner := (SELECT owner FROM dsh_sessions
                                  WHERE key = (to_jsonb(NEW) ->> TG_ARGV[0])::bigint);
            RETURN NEW;
        END
        $$
        """,
        "ALTER TABLE dsh_sessions ENABLE ROW LEVEL SECURITY",
        "ALTER TABLE dsh_sessions FORCE ROW LEVEL SECURITY",
        "CREATE POLICY dsh_read ON dsh_sessions FOR SELECT USING (owner = current_user "
        f"OR (dsh_sessions.key, dsh_sessions.owner) IN {_SHARED_WITH_ME})",
        "CREATE POLICY dsh_insert ON dsh_sessions FOR INSERT WITH CHECK (owner = current_user)",
        "CREATE POLICY dsh_update ON dsh_sessions FOR UPDATE "
        "USING (owner = current_user) WITH CHECK (owner = current_user)",
        "CREATE POLICY dsh_delete ON dsh_sessions FOR DELETE USING (owner = current_user)",
        grant_to_group("dsh_sessions"),
        "ALTER TABLE dsh_shares ENABLE ROW LEVEL SECURITY",
        "ALTER TABLE dsh_shares FORCE ROW LEVEL SECURITY",
        "CREATE POLICY dsh_read ON dsh_shares FOR SELECT "
        "USING (owner = current_user OR grantee = current_user)",
        "CREATE POLICY dsh_insert ON dsh_shares FOR INSERT WITH CHECK (owner = current_user)",
        "CREATE POLICY dsh_delete ON dsh_shares FOR DELETE USING (owner = current_user)",
        grant_to_group("dsh_shares", "SELECT, INSERT, DELETE"),
        *session_row_security("dsh_events"),
        *session_row_security("dsh_reply_leases"),
        # Issue 15's surface tables (the step before this one).
        *session_row_security("dsh_surface_nodes"),
        *session_row_security("dsh_surface_sums"),
        # Issue 18's index: read with the session; its backlog only by the session's
        # owner, who indexes it (a grantee may read the session but not write its index).
        *session_row_security("dsh_search"),
        *session_row_security("dsh_search_pending", grantees_read=False),
        # The schema version holds no session data: every member reads it; only the
        # tables' owner (who runs migrations) writes it.
        grant_to_group("dsh_schema", "SELECT"),
    )


_IS_REPLACE = """kind = 1 AND surface_op <> '"append"'"""
"""A surface event that is not an append: the WHERE of the ``dsh_events_replaces`` index
(migration step 6 wrote it: never change it) and of the query that reads it
(``read_surface_nodes``), which the planner can prove implies the index's."""

# Forward migrations: MIGRATIONS[i] takes schema version i to i + 1, in one transaction.
# To change the schema, append a step; never edit a released one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """
        CREATE TABLE dsh_sessions (
            key         bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id          bytea   NOT NULL,  -- surrogatepass UTF-8
            created_at  bigint  NOT NULL,  -- epoch milliseconds
            cwd         bytea,             -- surrogatepass UTF-8 or NULL
            next_seq    bigint  NOT NULL DEFAULT 0 CHECK (next_seq >= 0)
        )
        """,
        # Ids may be megabytes (beyond a btree entry): the index holds their digest, and
        # every lookup compares the id itself too.
        "CREATE UNIQUE INDEX dsh_sessions_id ON dsh_sessions (sha256(id))",
        "CREATE INDEX dsh_sessions_by_created ON dsh_sessions (created_at DESC)",
        """
        CREATE TABLE dsh_events (
            session_key       bigint   NOT NULL REFERENCES dsh_sessions (key) ON DELETE CASCADE,
            seq               bigint   NOT NULL CHECK (seq >= 0),
            type              bytea    NOT NULL,  -- surrogatepass UTF-8
            time              bigint   NOT NULL,  -- epoch milliseconds
            kind              smallint NOT NULL CHECK (kind IN (0, 1, 2)),  -- log, surface, title
            data              text     NOT NULL,  -- JSON object (core.jsoncodec.dumps_js)
            surface_op        text,               -- JSON: "append" | {"op":"replace",...} | NULL
            source_event_seqs text,               -- JSON array of seqs or NULL
            PRIMARY KEY (session_key, seq),
            CHECK ((kind = 1) = (surface_op IS NOT NULL))
        )
        """,
        "CREATE INDEX dsh_events_surface ON dsh_events (session_key, seq) WHERE kind = 1",
        "CREATE INDEX dsh_events_title ON dsh_events (session_key, seq) WHERE kind = 2",
        """
        CREATE TABLE dsh_reply_leases (
            session_key bigint NOT NULL PRIMARY KEY
                               REFERENCES dsh_sessions (key) ON DELETE CASCADE,
            owner       bytea  NOT NULL,  -- surrogatepass UTF-8
            expires_at  bigint NOT NULL   -- epoch milliseconds
        )
        """,
    ),
    (
        # What projection makes of each surface event (core.references.projection's
        # projection_code), kept beside it so prepare's outline read needs no event data;
        # NULL for rows written before (computed when read).
        "ALTER TABLE dsh_events ADD COLUMN projection integer",
    ),
    (
        # The current surface kept in each append's transaction (issue 15; as on SQLite):
        # one row per surface node ordered by ``pos`` (an append's pos is its seq; a
        # replace takes the pos of the first node it shadows, whose range it deletes),
        # and per session the count and UTF-8 bytes of its non-checkpoint messages.
        """
        CREATE TABLE dsh_surface_nodes (
            session_key bigint  NOT NULL REFERENCES dsh_sessions (key) ON DELETE CASCADE,
            pos         bigint  NOT NULL,
            seq         bigint  NOT NULL,
            projection  integer NOT NULL,
            PRIMARY KEY (session_key, pos)
        )
        """,
        "CREATE UNIQUE INDEX dsh_surface_nodes_seq ON dsh_surface_nodes (session_key, seq)",
        "CREATE INDEX dsh_surface_messages ON dsh_surface_nodes "
        "(session_key, pos DESC) INCLUDE (seq, projection) WHERE projection >= 0",
        "CREATE INDEX dsh_surface_checkpoints ON dsh_surface_nodes "
        "(session_key, pos) INCLUDE (seq, projection) "
        "WHERE projection >= 0 AND (projection & 2) = 2",
        """
        CREATE TABLE dsh_surface_sums (
            session_key bigint NOT NULL PRIMARY KEY
                               REFERENCES dsh_sessions (key) ON DELETE CASCADE,
            messages    bigint NOT NULL,
            bytes       bigint NOT NULL
        )
        """,
        # Run as Python: _backfill_surfaces (as SQL it does nothing, which is right for a
        # database without sessions, e.g. a test's template).
        _BACKFILL,
    ),
    (
        # Full-text search (issue 18, core.search): the text of each user and assistant
        # message on the current surface, one row per message (never chunks), keyed by
        # the session (so a row-level policy on the session covers it) and gone with it.
        """
        CREATE TABLE dsh_search (
            session_key bigint NOT NULL REFERENCES dsh_sessions (key) ON DELETE CASCADE,
            seq         bigint NOT NULL,
            id          bigint GENERATED ALWAYS AS IDENTITY,  -- insertion order (ties)
            text        text   NOT NULL,
            PRIMARY KEY (session_key, seq)
        )
        """,
        # A trigram index serves ILIKE '%term%' (pg_trgm; trusted since PostgreSQL 13, so
        # a role that may create in the database may create it). Without the extension
        # (not installed, or not allowed) search still works, by scanning: the NOTICE
        # says so, and nothing else fails.
        """
        DO $$
        DECLARE
            ext_schema name;
        BEGIN
            BEGIN
                CREATE EXTENSION IF NOT EXISTS pg_trgm;
            EXCEPTION WHEN OTHERS THEN
                RAISE NOTICE 'dsh: pg_trgm is not available (%): message search scans', SQLERRM;
            END;
            SELECT n.nspname INTO ext_schema FROM pg_extension AS e
                JOIN pg_namespace AS n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm';
            IF ext_schema IS NOT NULL THEN
                BEGIN
                    EXECUTE format(
                        'CREATE INDEX dsh_search_trgm ON dsh_search USING gin (text %I.gin_trgm_ops)',
                        ext_schema);
                EXCEPTION WHEN OTHERS THEN
                    RAISE NOTICE 'dsh: no trigram index (%): message search scans', SQLERRM;
                END;
            END IF;
        END
        $$
        """,
        # Sessions whose messages are not indexed yet (every existing one): indexed when a
        # store opened the database (schema 7 rebuilds the index in SQL instead).
        """
        CREATE TABLE dsh_search_pending (
            session_key bigint PRIMARY KEY REFERENCES dsh_sessions (key) ON DELETE CASCADE
        )
        """,
        "INSERT INTO dsh_search_pending (session_key) SELECT key FROM dsh_sessions",
    ),
    # After the search step, whose backlog (every session then) it must see whole.
    # Edited in place before its release (the owner column of each session-keyed table,
    # for cheap policies): no database holds the first form.
    owners_and_shares(),
    (
        # The newest replace of a session (the floor of its unknown events) without
        # reading every surface row, as on SQLite: a window's fold comes from
        # dsh_surface_nodes, and only this stayed a walk of the whole surface. Replaces
        # are few (compactions), so the index is small.
        f"CREATE INDEX dsh_events_replaces ON dsh_events (session_key, seq) WHERE {_IS_REPLACE}",
    ),
    # Issue 30: what members may do, the search index kept and read by the server, sizes,
    # leases for the owner only (stores.pgteam).
    team_step(),
    # Issue 31 (SPEC 4.1): a surrogate pair is its character; stored pairs are merged,
    # dsh_json reads them so (stores.pgpairs).
    pairs_step(),
    (
        # Issue 32: a session's profile and fork origin (core.log.SESSION_MARK_TYPES then),
        # read for every session at once (``read_latest_events``), from an index of
        # their rows alone (a session has few). Keyed by type, not by ``kind``: a member
        # writes that column, and a row of these types is found whatever it says. Events
        # are never packed here, so rows stored before need nothing else. A new mark type
        # needs a step of its own (never change this one).
        "CREATE INDEX dsh_events_marks ON dsh_events (session_key, type, seq) "
        f"WHERE type IN ({bytea(SESSION_PROFILE)}, {bytea(SESSION_FORK)})",
    ),
    (
        # Issue 33: where an imported session came from (``session/source``) is read for
        # every session as its profile is: the index is made again with the three types.
        # Nothing is packed here, so the source events stored before (an imported log
        # may hold them) are found as they are. A new mark type needs a step of its own
        # (never change this one).
        "DROP INDEX dsh_events_marks",
        "CREATE INDEX dsh_events_marks ON dsh_events (session_key, type, seq) WHERE type IN "
        f"({bytea(SESSION_PROFILE)}, {bytea(SESSION_FORK)}, {bytea(SESSION_SOURCE)})",
    ),
    # Issue 34: the counter every write bumps, followed by polling where LISTEN cannot be
    # (behind a transaction pooler) (stores.pgpooling).
    changes_step(GROUP_ROLE),
)
SCHEMA_VERSION = len(MIGRATIONS)

CHANGES_CHANNEL = "dsh_changes"
"""Every write transaction notifies this channel (delivered on commit) with the writing
store's own token, so each store counts the commits of the others without polling; it
also bumps the ``dsh_changes`` sequence, which stores behind a pooler poll."""
_BUMP = f"nextval('{CHANGES_SEQUENCE}')"

CHUNK_FLUSH_SECONDS = 0.25
"""How long a streamed reply's chunks are gathered before one write (see
``PostgresSessionStore.chunk_flush_seconds``)."""

# An arbitrary constant: the advisory lock that serialises migrations across clients.
_MIGRATION_LOCK = 0x64736873  # "dshs"

_CONNECT_TIMEOUT_S = 10.0
_POOL_MAX = 2  # operations are serialised; a spare connection covers a broken one

_EVENT_COLUMNS = "seq, type, time, data, surface_op, source_event_seqs"
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
(``stores.pglimits``: an admin's stricter ones win, which startup parameters would hide)."""

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


_SERVER_NOW_MS = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
"""The server's clock, in epoch milliseconds: what leases are judged by."""
_RELEASED = 0
"""The expiry of a lease given back (members may update a lease, not delete it)."""


def _holder(raw: bytes) -> str:
    """A lease's holder as stored (``encode_text``'s, so it compares equal to the string a
    holder took it with); bytes written by hand that do not decode are shown escaped
    rather than refused (its owner's own rows)."""
    try:
        return decode_text(raw)
    except UnicodeDecodeError:
        return raw.decode("utf-8", "backslashreplace")


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


class PostgresSessionStore:
    """A ``SessionStore`` on PostgreSQL; create it with ``await PostgresSessionStore.open(url)``."""

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
        # Behind a transaction pooler (stores.pgpooling): settings per transaction
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
        # those (an admin's stricter ones win over dsh's: stores.pglimits).
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
            else:
                await store._listen()
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
    def location(self) -> str:
        """The server and database, without the password (for messages)."""
        return self._location.display

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

    async def _migrate(self) -> None:
        """Create or upgrade dsh's tables. An up-to-date database is only read (so a
        read-only server or a hot standby opens, for reading); a newer one is refused."""
        what = "cannot prepare the database"
        try:
            version = await self._run(_schema_version, write=False, what=what)
        except _NotAMember as err:
            raise StoreError(
                f"{self.location}: role {err.role!r} may not use dsh's tables: it must be a "
                f"member of {GROUP_ROLE} (GRANT {GROUP_ROLE} TO {err.role}; see the README, "
                '"Setting up a team database")'
            ) from None
        self._check_not_newer(version)
        if version == SCHEMA_VERSION:
            return

        async def body(conn: asyncpg.Connection) -> None:
            # An upgrade may rebuild large tables: no statement timeout (lock_timeout stays:
            # a member holding a lock the upgrade needs is named, not waited for forever).
            await conn.execute("SET LOCAL statement_timeout = 0")
            # (Nor one while Python folds a session's surface between its statements.)
            await conn.execute("SET LOCAL idle_in_transaction_session_timeout = 0")
            # One migrator at a time across every client of the database.
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
            await conn.execute("CREATE TABLE IF NOT EXISTS dsh_schema (version integer NOT NULL)")
            version = await _schema_version(conn) or 0  # another client may have migrated
            self._check_not_newer(version)
            for step in range(version, SCHEMA_VERSION):
                for statement in MIGRATIONS[step]:
                    if statement == _BACKFILL:
                        await _backfill_surfaces(conn, self._migration_progress)
                        continue
                    if statement == REINDEX:
                        await _reindex(conn, self._index_progress)
                        continue
                    if statement == MERGE_PAIRS:
                        await merge_stored_pairs(conn)
                        continue
                    await conn.execute(statement)
            if version < SCHEMA_VERSION:
                await conn.execute("DELETE FROM dsh_schema")
                await conn.execute("INSERT INTO dsh_schema (version) VALUES ($1)", SCHEMA_VERSION)

        await self._run(body, write=False, what=what)

    def _check_not_newer(self, version: int | None) -> None:
        if version is not None and version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.location}: the database has dsh schema version {version}, newer "
                f"than this dsh understands ({SCHEMA_VERSION}); upgrade dsh"
            )

    # ------------------------------------------------------------------ change tracking

    async def _listen(self) -> None:
        """(Re)open the LISTEN connection; a missed stretch counts as a change."""
        async with self._listen_lock:
            if self.listening:
                return
            old, self._listener = self._listener, None
            if old is not None:
                with contextlib.suppress(Exception):
                    old.terminate()
            conn: asyncpg.Connection | None = None
            try:
                conn = await asyncpg.connect(
                    self._location.dsn,
                    timeout=_CONNECT_TIMEOUT_S,
                    server_settings=_server_settings(self._limits),
                )
                conn.add_termination_listener(self._listener_terminated)
                await conn.add_listener(CHANGES_CHANNEL, self._notified)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as err:
                if conn is not None:
                    conn.terminate()
                lost = self._listener_lost
                error = connect_error(
                    self._location, err, "lost the connection" if lost else "cannot connect"
                )
                if lost and not self._outage_told:  # once per outage
                    self._notice = (f"{error}; retrying", True)
                    self._outage_told = True
                raise error from err
            if self._listener_lost:
                self._others += 1  # commits may have been missed while it was down
                self._notice = (
                    f"Reconnected to {self.location} after the connection was lost.",
                    False,
                )
            self._listener = conn
            self._listener_lost = False
            self._outage_told = False

    async def _poll_changes(self) -> int:
        async def body(conn: asyncpg.Connection) -> tuple[int, Any, Any]:
            value = await conn.fetchval(POLL_SQL)
            bound = None
            if self._poller.wants_bound(value, self._bumps):
                bound = await conn.fetchval(BOUND_SQL)
            return value, bound, await conn.fetchval(XMIN_SQL)

        try:
            value, bound, xmin = await self._run(body, write=False, what="lost the connection")
        except StoreError as err:
            if not self._poll_lost:  # once per outage
                self._poll_lost = True
                self._poller.missed()
                self._notice = (f"{err}; retrying", True)
            raise
        if self._poll_lost:
            self._poll_lost = False
            self._notice = (f"Reconnected to {self.location} after the connection was lost.", False)
        return self._poller.observe(value, bound, xmin, self._bumps)

    def _notified(self, conn: object, pid: int, channel: str, payload: str) -> None:
        if payload != self._token:
            self._others += 1

    def _listener_terminated(self, conn: object) -> None:
        if conn is self._listener:
            self._listener_lost = True

    @property
    def listening(self) -> bool:
        """Whether other writers' commits are being heard right now."""
        return (
            self._listener is not None
            and not self._listener.is_closed()
            and not self._listener_lost
        )

    def take_notice(self) -> tuple[str, bool] | None:
        """What a host should tell its user about the connection since it last asked, once:
        ``(message, is_warning)`` (it was lost and is being retried; it is back), or
        ``None`` when nothing happened."""
        notice, self._notice = self._notice, None
        return notice

    async def change_token(self) -> int:
        """The number of other stores' commits heard through LISTEN/NOTIFY (no query at
        all while the listening connection is up). A lost connection is reopened here, and
        counts as a change since commits may have been missed meanwhile; see
        :meth:`take_notice` for what to tell the user.

        Behind a pooler, where LISTEN cannot work, the ``dsh_changes`` counter is polled
        instead (two small statements; ``stores.pgpooling.ChangePoller``)."""
        self._live()
        if self._pooled:
            return await self._poll_changes()
        if not self.listening:
            if self._listener is not None and not self._listener_lost:
                self._listener_lost = True  # closed under us without the callback
            await self._listen()
        return self._others

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

    # ------------------------------------------------------------------ writes

    async def create_session(
        self,
        session_id: str | None = None,
        *,
        cwd: str | None = None,
        created_at: int | None = None,
    ) -> SessionHeader:
        header = dataclasses.replace(new_header(session_id, cwd, created_at), owner=self._user)

        async def body(conn: asyncpg.Connection) -> SessionHeader:
            await _insert_session(conn, header, 0)
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

    async def _append(self, sid: str, batch: list[ValidatedEvent]) -> list[Event]:
        if batch and all(
            v.surface_op in (None, "append") and v.source_event_seqs is None for v in batch
        ):
            return await self._append_plain(sid, batch)

        async def body(conn: asyncpg.Connection) -> list[Event]:
            # Reserving the seqs locks the session row: appends to it queue here.
            row = await conn.fetchrow(
                f"UPDATE dsh_sessions SET next_seq = next_seq + $2 WHERE {_BY_ID} "
                "RETURNING key, next_seq - $2",
                encode_text(sid),
                len(batch),
            )
            if row is None:
                await self._refuse(conn, sid)
            key, first = row
            if not batch:
                return []
            folder: SurfaceFolder[None] = SurfaceFolder()
            if batch_has_replace(batch):
                for seq, op, seqs in await conn.fetch(
                    "SELECT seq, surface_op, source_event_seqs FROM dsh_events "
                    f"WHERE session_key = $1 AND kind = {KIND_SURFACE} ORDER BY seq",
                    key,
                ):
                    folder.apply(
                        seq, decode_op(op), None if seqs is None else decode_seqs(seqs), None
                    )
            return await _insert_events(conn, key, first, folder, batch)

        return await self._run(body, write=True)

    async def _append_plain(self, sid: str, batch: list[ValidatedEvent]) -> list[Event]:
        """Appends without replaces or provenance (nearly every append): no surface rule
        can fail, so reserving the seqs, inserting and notifying is one statement, one round
        trip, atomic on its own."""
        kinds = [event_kind(v.type, v.data, v.surface_op is not None) for v in batch]
        codes = [_projection(v) for v in batch]
        sums = MessageSums(codes)

        async def body(conn: asyncpg.Connection) -> int | None:
            first: int | None = await conn.fetchval(
                _APPEND_PLAIN_SQL,
                encode_text(sid),
                len(batch),
                [encode_text(v.type) for v in batch],
                [v.time for v in batch],
                kinds,
                [v.data_json for v in batch],
                [None if v.surface_op is None else APPEND_JSON for v in batch],
                CHANGES_CHANNEL,
                self._token,
                codes,
                sums.messages,
                sums.bytes,
            )
            if first is None:
                await self._refuse(conn, sid)
            return first

        first = await self._run(body, write=True, isolation=None)
        if first is None:
            raise SessionNotFoundError(sid)
        self._bumps += 1  # its statement bumped the counter
        return [
            Event(seq=first + i, type=v.type, time=v.time, data=v.data, surface_op=v.surface_op)
            for i, v in enumerate(batch)
        ]

    async def import_session(
        self, header: SessionHeader, events: Sequence[NewEvent] | EventBatches
    ) -> SessionHeader:
        """Create a session with exactly this header and log (seqs from 0), all or nothing.

        A taken id raises ``SessionExistsError``; a bad event ``InvalidEventError``.
        """
        checked = dataclasses.replace(import_header(header), owner=header.owner or self._user)
        batch = [] if isinstance(events, EventBatches) else validate_batch(events)

        async def body(conn: asyncpg.Connection) -> SessionHeader:
            key = await _insert_session(conn, checked, len(batch))
            folder: SurfaceFolder[None] = SurfaceFolder()
            first = len(await _insert_events(conn, key, 0, folder, batch))
            if isinstance(events, EventBatches):  # read off the event loop, one at a time
                while (more := await asyncio.to_thread(events.next_batch)) is not None:
                    first += len(
                        await _insert_events(conn, key, first, folder, validate_batch(more))
                    )
                await conn.execute(
                    "UPDATE dsh_sessions SET next_seq = $1 WHERE key = $2", first, key
                )
            return checked

        return await self._run(body, write=True)

    async def delete_session(self, session_id: str) -> None:
        sid = check_session_id(session_id)

        async def body(conn: asyncpg.Connection) -> None:
            # Members may not DELETE (a table privilege that would let them LOCK the
            # table): the tables' owner's function deletes what the caller owns.
            key, _ = await self._require_own(conn, sid)
            if not await conn.fetchval("SELECT dsh_delete_session($1)", key):
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
        """As every store (``core.leases.lease_blocks``), by the server's clock: a client
        whose clock runs fast or slow neither makes its lease outlive its TTL nor sees
        another's as run out early."""
        sid = check_session_id(session_id)
        ttl = check_lease_ttl(ttl_ms)

        async def body(conn: asyncpg.Connection) -> bool:
            # Locking the session row makes the check and the take one step for every client.
            row = await conn.fetchrow(
                f"SELECT key, {_SERVER_NOW_MS} FROM dsh_sessions WHERE {_BY_ID} FOR UPDATE",
                encode_text(sid),
            )
            if row is None:
                await self._refuse(conn, sid)
            key, now = row
            held = await conn.fetchrow(
                "SELECT owner, expires_at FROM dsh_reply_leases WHERE session_key = $1", key
            )
            if held is not None and lease_blocks(_holder(held[0]), held[1], owner, now, dead):
                return False
            await conn.execute(
                "INSERT INTO dsh_reply_leases (session_key, owner, expires_at) "
                "VALUES ($1, $2, $3) ON CONFLICT (session_key) "
                "DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at",
                key,
                encode_text(owner),
                now + ttl,
            )
            return True

        return await self._run(body, write=True)

    async def release_reply_lease(self, session_id: str, owner: str) -> None:
        sid = check_session_id(session_id)

        async def body(conn: asyncpg.Connection) -> None:
            # Members may not DELETE (see stores.pgteam): a released lease runs out at 0.
            await conn.execute(
                f"UPDATE dsh_reply_leases SET expires_at = {_RELEASED} WHERE owner = $2 "
                f"AND session_key = (SELECT key FROM dsh_sessions WHERE {_BY_ID})",
                encode_text(sid),
                encode_text(owner),
            )

        await self._run(body, write=True)

    async def renew_reply_lease(self, session_id: str, owner: str, *, ttl_ms: int) -> bool:
        sid = check_session_id(session_id)
        ttl = check_lease_ttl(ttl_ms)

        async def body(conn: asyncpg.Connection) -> bool:
            key, _ = await self._require_own(conn, sid)
            renewed = await conn.fetchval(
                f"UPDATE dsh_reply_leases SET expires_at = {_SERVER_NOW_MS} + $3 "
                f"WHERE session_key = $1 AND owner = $2 AND expires_at <> {_RELEASED} "
                "RETURNING true",
                key,
                encode_text(owner),
                ttl,
            )
            return bool(renewed)

        return await self._run(body, write=True)

    async def read_reply_lease(self, session_id: str) -> ReplyLease | None:
        sid = check_session_id(session_id)

        async def body(conn: asyncpg.Connection) -> ReplyLease | None:
            key, _ = await self._require_own(conn, sid)
            row = await conn.fetchrow(
                f"SELECT owner, expires_at - {_SERVER_NOW_MS} FROM dsh_reply_leases "
                f"WHERE session_key = $1 AND expires_at <> {_RELEASED}",
                key,
            )
            return None if row is None else ReplyLease(_holder(row[0]), row[1])

        return await self._run(body, write=False)

    async def break_reply_lease(self, session_id: str) -> bool:
        sid = check_session_id(session_id)

        async def body(conn: asyncpg.Connection) -> bool:
            key, _ = await self._require_own(conn, sid)
            broken = await conn.fetchval(
                f"UPDATE dsh_reply_leases SET expires_at = {_RELEASED} "
                f"WHERE session_key = $1 AND expires_at <> {_RELEASED} RETURNING true",
                key,
            )
            return bool(broken)

        return await self._run(body, write=True)

    def damaged_rows(self) -> tuple[DamagedRow, ...]:
        return self._damaged_sessions + self._damaged_titles

    # ------------------------------------------------------------------ sharing

    async def share(self, session_id: str, user: str) -> bool:
        sid = check_session_id(session_id)
        grantee = check_user(user)

        async def body(conn: asyncpg.Connection) -> bool:
            key, header = await self._require_own(conn, sid)
            check_grantee(grantee, self._user)
            if not await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", grantee):
                raise ShareError(f"there is no user {grantee!r} on {self.location}")
            added = await conn.fetchval(
                "INSERT INTO dsh_shares (session_key, owner, grantee) VALUES ($1, $2, $3) "
                "ON CONFLICT DO NOTHING RETURNING true",
                key,
                header.owner,
                grantee,
            )
            return bool(added)

        return await self._run(body, write=True)

    async def unshare(self, session_id: str, user: str) -> bool:
        sid = check_session_id(session_id)
        grantee = check_user(user)

        async def body(conn: asyncpg.Connection) -> bool:
            key, _ = await self._require_own(conn, sid)
            check_grantee(grantee, self._user)
            return bool(await conn.fetchval("SELECT dsh_unshare($1, $2)", key, grantee))

        return await self._run(body, write=True)

    async def list_shares(self, session_id: str | None = None) -> list[Share]:
        sid = None if session_id is None else check_session_id(session_id)

        async def body(conn: asyncpg.Connection) -> list[Any]:
            if sid is None:
                return list(
                    await conn.fetch(
                        f"SELECT {within('s.id', MAX_SESSION_ID_BYTES)}, g.owner, g.grantee "
                        "FROM dsh_shares AS g JOIN dsh_sessions AS s ON s.key = g.session_key "
                        "ORDER BY s.created_at DESC, s.id, g.grantee"
                    )
                )
            key, _ = await self._require_session(conn, sid)
            return list(
                await conn.fetch(
                    "SELECT NULL, NULL, owner, grantee FROM dsh_shares WHERE session_key = $1 "
                    "ORDER BY grantee",
                    key,
                )
            )

        rows = await self._run(body, write=False)
        if sid is not None:
            return [Share(sid, owner, grantee) for _, _, owner, grantee in rows]
        # A grant on a session whose id cannot be read is left out (as the session is).
        return [
            Share(name, owner, grantee)
            for raw, size, owner, grantee in rows
            if (name := read_id(raw, size)) is not None
        ]

    # ------------------------------------------------------------------ reads

    async def last_surface_seq(self, session_id: str) -> int | None:
        sid = check_session_id(session_id)

        async def body(conn: asyncpg.Connection) -> int | None:
            key, _ = await self._require_session(conn, sid)
            last = await conn.fetchval(
                "SELECT seq FROM dsh_events WHERE session_key = $1 "
                f"AND kind = {KIND_SURFACE} ORDER BY seq DESC LIMIT 1",
                key,
            )
            return None if last is None else int(last)

        return await self._run(body, write=False)

    async def _listing(self, name: str, sql: str, build: Callable[[list[Any]], Any]) -> Any:
        """A whole listing (every header, every title, …), reused while the database is
        unchanged: the key is the transaction's snapshot, read in the same repeatable-read
        transaction as the rows, so equal keys see exactly the same committed data (any
        commit anywhere, ours included, changes it; reads never do). The ``@`` picker
        lists every session on each keystroke: then that costs one small query."""

        async def body(conn: asyncpg.Connection) -> tuple[str, Any, list[Any]]:
            key = str(await conn.fetchval("SELECT pg_current_snapshot()::text"))
            cached = self._listings.get(name)
            if cached is not None and cached[0] == key:
                return key, cached[1], []
            return key, None, list(await conn.fetch(sql))

        key, cached, rows = await self._run(body, write=False, isolation="repeatable_read")
        if cached is not None:
            return cached
        # Building 100,000 entries takes a while: not on the event loop.
        value = await asyncio.to_thread(build, rows)
        self._listings[name] = (key, value)
        return value

    async def list_headers(self) -> list[SessionHeader]:
        headers, damaged = await self._listing("headers", HEADERS_SQL, build_headers)
        self._damaged_sessions = damaged
        return list(headers)

    async def read_header(self, session_id: str) -> SessionHeader:
        sid = check_session_id(session_id)

        async def body(conn: asyncpg.Connection) -> SessionHeader:
            return (await self._require_session(conn, sid))[1]

        return await self._run(body, write=False)

    async def read_events(self, session_id: str) -> list[Event]:
        sid = check_session_id(session_id)

        async def body(conn: asyncpg.Connection) -> list[Any]:
            key, _ = await self._require_session(conn, sid)
            return list(
                await conn.fetch(
                    f"SELECT {_EVENT_COLUMNS} FROM dsh_events WHERE session_key = $1 ORDER BY seq",
                    key,
                )
            )

        rows = await self._run(body, write=False)
        return await asyncio.to_thread(self._decode_events, rows)

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

        async def body(conn: asyncpg.Connection) -> tuple[SessionHeader, Any, list[Any], int]:
            key, header = await self._require_session(conn, sid)
            last = await conn.fetchval(
                "SELECT seq FROM dsh_events WHERE session_key = $1 ORDER BY seq DESC LIMIT 1",
                key,
            )
            # dsh_surface_nodes' primary key, in node order: no event read, no fold.
            seqs = await conn.fetch(
                "SELECT seq FROM dsh_surface_nodes WHERE session_key = $1 ORDER BY pos", key
            )
            # dsh_events_replaces backwards: the newest replace is its last entry (its
            # op decoded, so one that does not decode is a StoreError, as in a fold).
            floor = -1
            async for seq, op in conn.cursor(
                "SELECT seq, surface_op FROM dsh_events "
                f"WHERE session_key = $1 AND {_IS_REPLACE} ORDER BY seq DESC",
                key,
                prefetch=4,
            ):
                try:
                    if decode_op(op) != "append":
                        floor = seq
                        break
                except (ValueError, TypeError) as err:
                    raise StoreError(f"{self.location}: a stored event is corrupt ({err})") from err
            return header, last, seqs, floor

        # One snapshot for the four reads.
        header, last, rows, floor = await self._run(body, write=False, isolation="repeatable_read")
        return header, last, tuple([row[0] for row in rows]), floor

    async def read_surface_tail(
        self, session_id: str, count: int
    ) -> tuple[SessionHeader, int | None, list[SurfaceRow]]:
        limit = check_count(count)
        return await self._read_surface(
            session_id, "seq, surface_op, source_event_seqs", self._decode_surface_rows, limit
        )

    async def read_surface_outline(
        self, session_id: str
    ) -> tuple[SessionHeader, int | None, list[SurfaceOutline]]:
        header, last, rows = await self._read_surface(
            session_id, "seq, surface_op, source_event_seqs, projection", list
        )
        missing = [row[0] for row in rows if row[3] is None]  # written before schema 2
        codes: dict[int, int] = {}
        if missing:
            events = await self.read_events_at(session_id, missing)
            codes = {event.seq: projection_code(event) for event in events}
        surface = await asyncio.to_thread(self._decode_surface_rows, [row[:3] for row in rows])
        outline = [
            SurfaceOutline(
                row.seq,
                row.surface_op,
                row.source_event_seqs,
                codes[row.seq] if raw[3] is None else raw[3],
            )
            for row, raw in zip(surface, rows, strict=True)
        ]
        return header, last, outline

    async def read_message_tail(
        self, session_id: str, budget: int
    ) -> tuple[SessionHeader, int | None, MessageTail]:
        sid = check_session_id(session_id)
        limit = check_count(budget)

        async def body(conn: asyncpg.Connection) -> tuple[SessionHeader, int | None, MessageTail]:
            key, header = await self._require_session(conn, sid)
            last = await conn.fetchval(
                "SELECT seq FROM dsh_events WHERE session_key = $1 ORDER BY seq DESC LIMIT 1",
                key,
            )
            walk = TailWalk(limit)
            # Newest first along dsh_surface_messages; stops once the budget is spent.
            async for pos, seq, code in conn.cursor(
                "SELECT pos, seq, projection FROM dsh_surface_nodes "
                "WHERE session_key = $1 AND projection >= 0 ORDER BY pos DESC",
                key,
                prefetch=128,
            ):
                if walk.take(pos, seq, code):
                    break
            if not walk.exceeded:
                return header, last, walk.tail()
            checkpoints = await conn.fetch(
                "SELECT seq, projection FROM dsh_surface_nodes WHERE session_key = $1 "
                "AND projection >= 0 AND (projection & 2) = 2 AND pos < $2 ORDER BY pos",
                key,
                walk.start,
            )
            row = await conn.fetchrow(
                "SELECT messages, bytes FROM dsh_surface_sums WHERE session_key = $1", key
            )
            messages, size = (0, 0) if row is None else (row[0], row[1])
            return header, last, walk.tail(checkpoints, messages, size)

        return await self._run(body, write=False, isolation="repeatable_read")

    async def _read_surface(
        self,
        session_id: str,
        columns: str,
        decode: Callable[[list[Any]], list[T]],
        newest: int | None = None,
    ) -> tuple[SessionHeader, int | None, list[T]]:
        """The surface rows in seq order: all of them, or only the ``newest`` (read
        backwards through the surface index)."""
        sid = check_session_id(session_id)

        async def body(
            conn: asyncpg.Connection,
        ) -> tuple[SessionHeader, int | None, list[Any]]:
            key, header = await self._require_session(conn, sid)
            last = await conn.fetchval(
                "SELECT seq FROM dsh_events WHERE session_key = $1 ORDER BY seq DESC LIMIT 1",
                key,
            )
            if newest is None:
                rows = await conn.fetch(
                    f"SELECT {columns} FROM dsh_events "
                    f"WHERE session_key = $1 AND kind = {KIND_SURFACE} ORDER BY seq",
                    key,
                )
                return header, last, list(rows)
            rows = await conn.fetch(
                f"SELECT {columns} FROM dsh_events "
                f"WHERE session_key = $1 AND kind = {KIND_SURFACE} ORDER BY seq DESC LIMIT $2",
                key,
                newest,
            )
            return header, last, list(reversed(rows))

        # One snapshot for the three reads.
        header, last, rows = await self._run(body, write=False, isolation="repeatable_read")
        return header, last, await asyncio.to_thread(decode, rows)

    async def read_events_at(self, session_id: str, seqs: Sequence[int]) -> list[Event]:
        sid = check_session_id(session_id)
        wanted = check_seqs(seqs)

        async def body(conn: asyncpg.Connection) -> list[Any]:
            key, _ = await self._require_session(conn, sid)
            if not wanted:
                return []
            return list(
                await conn.fetch(
                    f"SELECT {_EVENT_COLUMNS} FROM dsh_events "
                    "WHERE session_key = $1 AND seq = ANY($2::bigint[])",
                    key,
                    sorted(set(wanted)),
                )
            )

        rows = await self._run(body, write=False)
        by_seq = {event.seq: event for event in await asyncio.to_thread(self._decode_events, rows)}
        for seq in wanted:
            if seq not in by_seq:
                raise missing_seq_error(sid, seq)
        return [by_seq[seq] for seq in wanted]

    async def read_bodies_at(self, session_id: str, seqs: Sequence[int]) -> list[tuple[str, Any]]:
        sid = check_session_id(session_id)
        wanted = check_seqs(seqs)

        async def body(conn: asyncpg.Connection) -> list[Any]:
            key, _ = await self._require_session(conn, sid)
            if not wanted:
                return []
            return list(
                await conn.fetch(
                    "SELECT seq, type, data FROM dsh_events "
                    "WHERE session_key = $1 AND seq = ANY($2::bigint[])",
                    key,
                    sorted(set(wanted)),
                )
            )

        def decode(rows: list[Any]) -> dict[int, tuple[str, Any]]:
            try:
                return {seq: (decode_text(t), loads_exact(data)) for seq, t, data in rows}
            except (ValueError, TypeError) as err:
                raise StoreError(f"{self.location}: a stored event is corrupt ({err})") from err

        found = await asyncio.to_thread(decode, await self._run(body, write=False))
        for seq in wanted:
            if seq not in found:
                raise missing_seq_error(sid, seq)
        return [found[seq] for seq in wanted]

    async def read_unknown_events(
        self, session_id: str, after: int = -1, through: int | None = None
    ) -> list[Event]:
        sid = check_session_id(session_id)
        low, high = check_seq_range(after, through)
        known = sorted(encode_text(t) for t in KNOWN_EVENT_TYPES)

        async def body(conn: asyncpg.Connection) -> list[Any]:
            key, _ = await self._require_session(conn, sid)
            # One range of the primary key; the type test is a filter on its rows.
            return list(
                await conn.fetch(
                    f"SELECT {_EVENT_COLUMNS} FROM dsh_events WHERE session_key = $1 "
                    f"AND seq > $2 AND ($3::bigint IS NULL OR seq <= $3) AND kind = {KIND_LOG} "
                    "AND NOT (type = ANY($4::bytea[])) ORDER BY seq",
                    key,
                    low,
                    high,
                    known,
                )
            )

        rows = await self._run(body, write=False)
        return await asyncio.to_thread(self._decode_events, rows)

    async def read_titles(
        self, session_ids: Sequence[str] | None = None
    ) -> dict[str, SessionTitle]:
        wanted = None if session_ids is None else check_session_ids(session_ids)
        if wanted is not None and not wanted:
            return {}

        if wanted is None:
            every, damaged = await self._listing(
                "titles", TITLES_SQL.format(sessions="dsh_sessions"), build_titles
            )
            self._damaged_titles = damaged
            return dict(every)

        async def body(conn: asyncpg.Connection) -> list[Any]:
            return list(
                await conn.fetch(
                    TITLES_SQL.format(sessions=WANTED_SESSIONS), [encode_text(s) for s in wanted]
                )
            )

        rows = await self._run(body, write=False)
        return (await asyncio.to_thread(build_titles, rows))[0]

    async def read_latest_events(
        self, type: str, session_ids: Sequence[str] | None = None
    ) -> dict[str, Event]:
        mark = check_mark_type(type)
        wanted = None if session_ids is None else check_session_ids(session_ids)
        if wanted is not None and not wanted:
            return {}
        if wanted is None:
            every: dict[str, Event] = await self._listing(
                f"latest {mark}", latest_events_sql(mark, "dsh_sessions"), build_latest_events
            )
            return dict(every)

        async def body(conn: asyncpg.Connection) -> list[Any]:
            return list(
                await conn.fetch(
                    latest_events_sql(mark, WANTED_SESSIONS), [encode_text(s) for s in wanted]
                )
            )

        rows = await self._run(body, write=False)
        return await asyncio.to_thread(build_latest_events, rows)

    async def search_messages(self, query: str, *, limit: int = 20) -> list[SearchHit]:
        terms = search_terms(query)
        wanted = check_search_limit(limit)
        if not terms:
            return []
        regexes = [_case_regex(t) for t in terms]
        patterns = [
            like_pattern(t) if r is None else r for t, r in zip(terms, regexes, strict=True)
        ]
        flags = [r is not None for r in regexes]

        async def body(conn: asyncpg.Connection) -> tuple[list[Any], list[Any]]:
            # The owner's function applies the access rule and uses the trigram index
            # (stores.pgteam); the ids come from dsh_sessions under row security, which
            # checks the rule a second time.
            found = list(
                await conn.fetch(
                    "SELECT session_key, seq, text FROM dsh_search_find($1, $2, $3)",
                    patterns,
                    flags,
                    RANK_WINDOW,
                )
            )
            keys = sorted({row[0] for row in found})
            ids = list(await conn.fetch(IDS_OF_KEYS_SQL, keys)) if keys else []
            return found, ids

        found, ids = await self._run(body, write=False, isolation="repeatable_read")

        def rank() -> list[SearchHit]:
            names = {key: sid for key, raw, size in ids if (sid := read_id(raw, size)) is not None}
            rows = [(names[key], seq, text) for key, seq, text in found if key in names]
            return rank_hits(rows, terms, wanted)

        return await asyncio.to_thread(rank)

    async def read_last_event_times(self) -> dict[str, int]:
        times: dict[str, int] = await self._listing(
            "last_event_times",
            LAST_EVENT_TIMES_SQL,
            lambda rows: {
                sid: time
                for raw, size, time in rows
                if time is not None and (sid := read_id(raw, size)) is not None
            },
        )
        return dict(times)


# Reserve the seqs (locking the session row), insert the events and notify, in one
# statement; no row when the session does not exist (then nothing is written). The
# messages' search rows are written by the table's trigger (stores.pgteam).
_APPEND_PLAIN_SQL = f"""
WITH s AS (
    UPDATE dsh_sessions SET next_seq = next_seq + $2 WHERE {_BY_ID}
    RETURNING key, next_seq - $2 AS first
), ins AS (
    INSERT INTO dsh_events (session_key, seq, type, time, kind, data, surface_op, projection)
    SELECT s.key, s.first + u.n - 1, u.type, u.time, u.kind, u.data, u.op, u.projection
    FROM s, unnest(
        $3::bytea[], $4::bigint[], $5::smallint[], $6::text[], $7::text[], $10::integer[]
    ) WITH ORDINALITY AS u (type, time, kind, data, op, projection, n)
), nodes AS (
    INSERT INTO dsh_surface_nodes (session_key, pos, seq, projection)
    SELECT s.key, s.first + u.n - 1, s.first + u.n - 1, u.projection
    FROM s, unnest($10::integer[]) WITH ORDINALITY AS u (projection, n)
    WHERE u.projection IS NOT NULL
), sums AS (
    INSERT INTO dsh_surface_sums (session_key, messages, bytes)
    SELECT s.key, $11::bigint, $12::bigint FROM s WHERE $11::bigint <> 0
    ON CONFLICT (session_key) DO UPDATE
    SET messages = dsh_surface_sums.messages + excluded.messages,
        bytes = dsh_surface_sums.bytes + excluded.bytes
), notified AS (
    SELECT pg_notify($8, $9), {_BUMP} FROM s
)
SELECT s.first FROM s, notified
"""


class _NotAMember(Exception):
    """The connecting role may not read dsh's tables (not in ``GROUP_ROLE``)."""

    def __init__(self, role: str) -> None:
        super().__init__(role)
        self.role = role


async def _schema_version(conn: asyncpg.Connection) -> int | None:
    """dsh's schema version in the database (``None``: no dsh tables at all)."""
    role, table = await conn.fetchrow("SELECT current_user, to_regclass('dsh_schema')")
    if table is None:
        return None
    try:
        version = await conn.fetchval("SELECT max(version) FROM dsh_schema")
    except asyncpg.InsufficientPrivilegeError:
        raise _NotAMember(str(role)) from None
    return 0 if version is None else int(version)


async def _current_user(conn: asyncpg.Connection) -> str:
    return str(await conn.fetchval("SELECT current_user"))


async def _insert_session(conn: asyncpg.Connection, header: SessionHeader, next_seq: int) -> int:
    """Insert the session, owned by ``header.owner`` (row security lets a role store only
    its own, unless it is exempt from it, as an admin migrating a whole database is)."""
    try:
        key: int = await conn.fetchval(
            "INSERT INTO dsh_sessions (id, created_at, cwd, next_seq, owner) "
            "VALUES ($1, $2, $3, $4, coalesce($5, current_user)) RETURNING key",
            encode_text(header.id),
            header.created_at,
            None if header.cwd is None else encode_text(header.cwd),
            next_seq,
            header.owner,
        )
    except asyncpg.UniqueViolationError as err:
        if getattr(err, "constraint_name", None) != "dsh_sessions_id":
            raise  # not the id: a StoreError saying what the server said
        raise SessionExistsError(header.id) from err
    except asyncpg.InsufficientPrivilegeError as err:  # row security: another's session
        raise SessionReadOnlyError(header.id, header.owner or "") from err
    return key


@functools.cache
def _same_upper() -> dict[str, str]:
    """Each uppercase letter (beyond ASCII) and every character whose uppercase it is."""
    groups: dict[str, dict[str, None]] = {}
    for code in (*range(0x80, 0xD800), *range(0xE000, 0x20000)):
        char = chr(code)
        upper = char.upper()
        if len(upper) == 1 and upper != char:
            groups.setdefault(upper, {upper: None})[char] = None
    return {upper: "".join(chars) for upper, chars in groups.items()}


def _case_regex(term: str) -> str | None:
    """A case-sensitive POSIX regex that matches ``term`` in any case, for a term with
    letters beyond ASCII (``None`` for another term: ILIKE folds it right in every
    locale). ILIKE folds by the database's LC_CTYPE, which in a C-locale database is ASCII
    only; this folds the way ``core.search.matches`` does (which checks every row)
    whatever the locale. Every other character is literal (an ASCII one escaped)."""
    if term.isascii():
        return None
    groups = _same_upper()
    out: list[str] = []
    cased = False
    for char in term:
        upper = char.upper()
        variants = groups.get(upper if len(upper) == 1 else char)
        if variants is not None or char.lower() != char or upper != char:
            found = dict.fromkeys(variants or "")
            found.update(dict.fromkeys(c for c in (char, char.lower(), upper) if len(c) == 1))
            cased = cased or not char.isascii()
            out.append("[" + "".join(found) + "]")
        elif char.isascii() and not char.isalnum():
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out) if cased else None


async def _index_events(
    conn: asyncpg.Connection, key: int, events: Sequence[Event], folder: SurfaceFolder[None]
) -> None:
    """Keep the session's search index in step with its surface after ``events`` (in the
    append's transaction): the table's trigger indexes their messages; this drops those
    their replaces shadowed (``folder`` holds the surface after the batch whenever it has
    a replace), through the owner's function (members may not delete search rows)."""
    gone: list[int] = []
    for event in events:
        op = event.surface_op
        if op is not None and op != "append":
            gone.extend(seq for seq in event.source_event_seqs or () if seq not in folder)
    if gone:
        await conn.execute("SELECT dsh_unindex($1, $2::bigint[])", key, gone)


def _projection(event: ValidatedEvent) -> int | None:
    """The projection code kept beside a surface event (``None`` for a log event)."""
    if event.surface_op is None:
        return None
    return projection_code(
        build_event(0, event.type, event.time, event.data, event.surface_op, None)
    )


async def _insert_events(
    conn: asyncpg.Connection,
    key: int,
    first: int,
    folder: SurfaceFolder[None],
    batch: Sequence[ValidatedEvent],
) -> list[Event]:
    """Check ``batch`` against ``folder`` (see ``check_batch``), then insert it from seq
    ``first``; the caller's transaction makes it all or nothing."""
    check_batch(folder, first, batch)
    codes = [_projection(v) for v in batch]
    await conn.executemany(
        "INSERT INTO dsh_events (session_key, seq, type, time, kind, data, surface_op, "
        "source_event_seqs, projection) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        [
            (
                key,
                first + i,
                encode_text(v.type),
                v.time,
                event_kind(v.type, v.data, v.surface_op is not None),
                v.data_json,
                None if v.surface_op is None else encode_op(v.surface_op),
                None if v.source_event_seqs is None else encode_seqs(v.source_event_seqs),
                codes[i],
            )
            for i, v in enumerate(batch)
        ],
    )
    await _track_surface(conn, key, first, batch, codes)
    events = [
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
    await _index_events(conn, key, events, folder)
    return events


_INSERT_NODE_SQL = (
    "INSERT INTO dsh_surface_nodes (session_key, pos, seq, projection) VALUES ($1, $2, $3, $4)"
)


async def _track_surface(
    conn: asyncpg.Connection,
    key: int,
    first: int,
    batch: Sequence[ValidatedEvent],
    codes: Sequence[int | None],
) -> None:
    """Keep ``dsh_surface_nodes`` and ``dsh_surface_sums`` in step with a batch whose
    surface operations were checked (so every replace's range is on the surface)."""
    pending: list[tuple[int, int, int, int]] = []
    sums = MessageSums()
    for offset, v in enumerate(batch):
        op = v.surface_op
        code = codes[offset]
        if op is None or code is None:
            continue
        seq = first + offset
        if isinstance(op, Replace):
            if pending:
                await conn.executemany(_INSERT_NODE_SQL, pending)
                pending.clear()
            ends = await conn.fetch(
                "SELECT pos FROM dsh_surface_nodes WHERE session_key = $1 "
                "AND seq IN ($2, $3) ORDER BY pos",
                key,
                op.start,
                op.end,
            )
            if not ends:
                raise StoreError(f"the surface index lacks seqs {op.start}..{op.end}")
            lo, hi = ends[0][0], ends[-1][0]
            for (gone,) in await conn.fetch(
                "SELECT dsh_shadow_nodes($1, $2, $3)",
                key,
                lo,
                hi,
            ):
                sums.remove(gone)
            pending.append((key, lo, seq, code))
        else:
            pending.append((key, seq, seq, code))
        sums.add(code)
    if pending:
        await conn.executemany(_INSERT_NODE_SQL, pending)
    if sums.messages or sums.bytes:
        await conn.execute(
            "INSERT INTO dsh_surface_sums (session_key, messages, bytes) VALUES ($1, $2, $3) "
            "ON CONFLICT (session_key) DO UPDATE "
            "SET messages = dsh_surface_sums.messages + excluded.messages, "
            "bytes = dsh_surface_sums.bytes + excluded.bytes",
            key,
            sums.messages,
            sums.bytes,
        )


_REINDEX_BATCH = 20
"""Sessions indexed per statement by the upgrade to schema 7 (its progress steps)."""


async def _reindex(conn: asyncpg.Connection, progress: Callable[[int, int], None] | None) -> None:
    """Migration to schema 7: index the current surface's messages of every session
    again, in SQL (``stores.pgteam``), a few sessions per statement; ``progress`` gets
    (sessions done, sessions in all) after each."""
    keys = [row[0] for row in await conn.fetch("SELECT key FROM dsh_sessions ORDER BY key")]
    for start in range(0, len(keys), _REINDEX_BATCH):
        batch = keys[start : start + _REINDEX_BATCH]
        await conn.execute(REINDEX_SQL, batch)
        if progress is not None:
            progress(start + len(batch), len(keys))


_BACKFILL_REPORT_MIN = 100_000
"""An upgrade folding at least this many surface rows reports its progress."""
_BACKFILL_BATCH = 50_000


async def _backfill_surfaces(
    conn: asyncpg.Connection,
    progress: Callable[[int, int], None] | None,
    only: list[int] | None = None,
) -> None:
    """Migration to schema 3: fold every session's surface once into
    ``dsh_surface_nodes`` and ``dsh_surface_sums`` (positions: the node's rank, below
    every later seq). ``only``: these sessions alone (schema 8, nodes and sums gone)."""
    total = await conn.fetchval(f"SELECT count(*) FROM dsh_events WHERE kind = {KIND_SURFACE}")
    report = progress if progress is not None and total >= _BACKFILL_REPORT_MIN else None
    if only is not None:
        report = None
    done = 0
    keys = [row[0] for row in await conn.fetch("SELECT key FROM dsh_sessions ORDER BY key")]
    if only is not None:
        keys = only
    for key in keys:
        # Pages by seq (keyset), not a cursor: a cursor's portal would stay open to the
        # end of the transaction, and a later step's ALTER TABLE dsh_events refuses to
        # run while one is ("being used by active queries in this session").
        outline: list[SurfaceOutline] = []
        after = -1
        try:
            while rows := await conn.fetch(
                "SELECT seq, type, time, data, surface_op, source_event_seqs, projection "
                f"FROM dsh_events WHERE session_key = $1 AND kind = {KIND_SURFACE} "
                "AND seq > $2 ORDER BY seq LIMIT $3",
                key,
                after,
                _BACKFILL_BATCH,
            ):
                after = rows[-1][0]
                for seq, type_, time, data, op_json, seqs_json, code in rows:
                    op = decode_op(op_json)
                    seqs = None if seqs_json is None else decode_seqs(seqs_json)
                    if code is None:  # written before schema 2
                        event = build_event(
                            seq, decode_text(type_), time, loads_exact(data), op, seqs
                        )
                        code = projection_code(event)
                    outline.append(SurfaceOutline(seq, op, seqs, code))
                done += len(rows)
                if report is not None:
                    report(done, total)
            nodes = fold_surface(outline)
        except (ValueError, TypeError) as err:  # InvalidEventError is a ValueError
            raise StoreError(f"cannot upgrade: a stored event is corrupt ({err})") from err
        await conn.executemany(
            _INSERT_NODE_SQL, [(key, pos, n.seq, n.projection) for pos, n in enumerate(nodes)]
        )
        sums = MessageSums(n.projection for n in nodes)
        if sums.messages:
            await conn.execute(
                "INSERT INTO dsh_surface_sums (session_key, messages, bytes) VALUES ($1, $2, $3)",
                key,
                sums.messages,
                sums.bytes,
            )
    if report is not None and done < total:
        report(total, total)
