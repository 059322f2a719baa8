"""The PostgreSQL schema: ``MIGRATIONS`` (each step takes the schema one version up, in one
transaction), ``SCHEMA_VERSION``, and the migration that runs them under an advisory lock.
"""

from __future__ import annotations

import asyncpg

from core.errors import StoreError
from core.log import SESSION_FORK, SESSION_PROFILE, SESSION_SOURCE
from stores.postgres.connection import PgConnection
from stores.postgres.pairs import MERGE_PAIRS, merge_stored_pairs, pairs_step
from stores.postgres.pooling import changes_step
from stores.postgres.rows import bytea
from stores.postgres.search import _reindex
from stores.postgres.security import owners_and_shares
from stores.postgres.surfaces import _IS_REPLACE, _backfill_surfaces
from stores.postgres.team import GROUP_ROLE, REINDEX, team_step

_BACKFILL = "SELECT 'dsh: fold every surface into its nodes'"
"""A migration statement run as Python (``_backfill_surfaces``), a no-op as SQL."""


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
    # leases for the owner only (stores.postgres.team).
    team_step(),
    # Issue 31 (SPEC 4.1): a surrogate pair is its character; stored pairs are merged,
    # dsh_json reads them so (stores.postgres.pairs).
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
    # (behind a transaction pooler) (stores.postgres.pooling).
    changes_step(GROUP_ROLE),
)
SCHEMA_VERSION = len(MIGRATIONS)


# An arbitrary constant: the advisory lock that serialises migrations across clients.
_MIGRATION_LOCK = 0x64736873  # "dshs"


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


class Migrations(PgConnection):
    """Creating and upgrading dsh's tables."""

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
