"""The SQLite store's schema: its forward migrations (``MIGRATIONS``, ``SCHEMA_VERSION``),
the steps run as Python, and setting up a connection (pragmas, the version check, the
upgrade in one transaction).
"""

from __future__ import annotations

import contextlib
import sqlite3
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from core.errors import StoreError
from core.jsoncodec import loads_exact
from core.log import SESSION_FORK, SESSION_PROFILE, SESSION_SOURCE, ValidatedEvent
from core.surface import SurfaceFolder
from stores.sqlite.connection import _scalar
from stores.sqlite.packs import _body_parts, _pack_types, _rebuild_lines, _ReplyTexts, _unlinked
from stores.sqlite.search import _PENDING_PER_TRANSACTION, _holds
from stores.sqlite.sharing import _Access
from stores.sqlite.shortgrams import BLOCK, _index_blocks, _start_short_grams
from stores.sqlite.sql import _IS_MARK, _IS_MARK_V11, _IS_REPLACE, KIND_PACK, _is_linked
from stores.sqlite.surfaces import _backfill_surfaces
from stores.sqlite.writes import _insert_events

if TYPE_CHECKING:  # (``SCHEMA_VERSION`` is read by a one-shot read, without aiosqlite)
    import aiosqlite

_BACKFILL = "SELECT 'dsh: fold every surface into its nodes'"
"""A migration statement run as Python (``_backfill_surfaces``), a no-op as SQL."""
_REBUILD_SEARCH = "SELECT 'dsh: rebuild the search index from its rows'"
_MERGE_PAIRS = "SELECT 'dsh: write each stored surrogate pair as its character'"
"""A migration statement run as Python (``_rebuild_search_index``), a no-op as SQL."""
_SPLIT_MARKS = "SELECT 'dsh: store each session mark in a row of its own'"
"""A migration statement run as Python (``_split_packed_marks`` of profiles and forks),
a no-op as SQL."""
_SPLIT_SOURCES = "SELECT 'dsh: store each session source in a row of its own'"
"""A migration statement run as Python (``_split_packed_marks`` of sources), a no-op as
SQL."""
_SHORT_GRAMS = "SELECT 'dsh: index the blocks of search rows for short terms'"
"""A migration statement run as Python (``_rebuild_short_grams``), a no-op as SQL."""


_MARKS_OF_STEP: dict[str, frozenset[str]] = {
    _SPLIT_MARKS: frozenset({SESSION_PROFILE, SESSION_FORK}),
    _SPLIT_SOURCES: frozenset({SESSION_SOURCE}),
}
"""The mark types each splitting migration statement takes out of their packs (a new
mark type needs a step of its own: never change a released one)."""


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
    (
        # v3: an integer session key in every row instead of the text id, packed runs of
        # log events (kind 3: ``n`` events from ``seq``), compressed large payloads
        # (``data`` a BLOB). Existing rows are copied as they are (one event each).
        """
        CREATE TABLE sessions_v3 (
            key         INTEGER PRIMARY KEY,
            id          BLOB    NOT NULL UNIQUE,       -- surrogatepass UTF-8
            created_at  INTEGER NOT NULL,              -- epoch milliseconds
            cwd         BLOB                           -- surrogatepass UTF-8 or NULL
        ) STRICT
        """,
        "INSERT INTO sessions_v3 (id, created_at, cwd) "
        "SELECT id, created_at, cwd FROM sessions ORDER BY created_at, id",
        """
        CREATE TABLE events_v3 (
            session           INTEGER NOT NULL REFERENCES sessions_v3 (key) ON DELETE CASCADE,
            seq               INTEGER NOT NULL CHECK (seq >= 0),  -- of the row's first event
            n                 INTEGER NOT NULL DEFAULT 1 CHECK (n >= 1),  -- events in the row
            type              BLOB    NOT NULL,  -- surrogatepass UTF-8 (a pack: its first's)
            time              INTEGER NOT NULL,  -- epoch milliseconds (a pack: its last's)
            kind              INTEGER NOT NULL CHECK (kind IN (0, 1, 2, 3)),  -- 3: a pack
            surface_op        TEXT,              -- JSON: "append" | {"op":"replace",...} | NULL
            source_event_seqs TEXT,              -- JSON array of seqs or NULL
            projection        INTEGER,           -- surface events: projection_code (NULL: not known)
            data              ANY     NOT NULL,  -- last: TEXT JSON, or BLOB: zlib JSON or a pack
            PRIMARY KEY (session, seq),
            CHECK ((kind = 1) = (surface_op IS NOT NULL)),
            CHECK (kind = 3 OR n = 1)
        ) STRICT
        """,
        "INSERT INTO events_v3 (session, seq, type, time, kind, data, surface_op, "
        "source_event_seqs) SELECT s.key, e.seq, e.type, e.time, e.kind, e.data, "
        "e.surface_op, e.source_event_seqs FROM events AS e JOIN sessions_v3 AS s "
        "ON s.id = e.session_id ORDER BY s.key, e.seq",
        """
        CREATE TABLE reply_leases_v3 (
            session     INTEGER NOT NULL PRIMARY KEY
                                REFERENCES sessions_v3 (key) ON DELETE CASCADE,
            owner       TEXT    NOT NULL,
            expires_at  INTEGER NOT NULL  -- epoch milliseconds
        ) STRICT
        """,
        "INSERT INTO reply_leases_v3 (session, owner, expires_at) "
        "SELECT s.key, r.owner, r.expires_at FROM reply_leases AS r "
        "JOIN sessions_v3 AS s ON s.id = r.session_id",
        "DROP TABLE reply_leases",
        "DROP TABLE events",
        "DROP TABLE sessions",
        "ALTER TABLE sessions_v3 RENAME TO sessions",
        "ALTER TABLE events_v3 RENAME TO events",
        "ALTER TABLE reply_leases_v3 RENAME TO reply_leases",
        "CREATE INDEX sessions_by_created ON sessions (created_at DESC, id)",
        # The surface's outline (and its rows, and the last surface seq) from the index
        # alone: no visit to the rows, whose data may span overflow pages.
        "CREATE INDEX events_surface ON events "
        "(session, seq, surface_op, source_event_seqs, projection) WHERE kind = 1",
        "CREATE INDEX events_title ON events (session, seq) WHERE kind = 2",
    ),
    (
        # The current surface kept in each append's transaction (issue 15), so prepare
        # reads the newest messages and the checkpoints, not a fold of every surface row:
        # one row per surface node, ordered by ``pos`` (an append's pos is its seq; a
        # replace takes the pos of the first node it shadows, whose range it deletes).
        """
        CREATE TABLE surface_nodes (
            session     INTEGER NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
            pos         INTEGER NOT NULL,  -- node order
            seq         INTEGER NOT NULL,
            projection  INTEGER NOT NULL,  -- projection_code of the event
            PRIMARY KEY (session, pos)
        ) STRICT, WITHOUT ROWID
        """,
        "CREATE UNIQUE INDEX surface_nodes_seq ON surface_nodes (session, seq)",
        "CREATE INDEX surface_messages ON surface_nodes (session, pos, seq, projection) "
        "WHERE projection >= 0",
        "CREATE INDEX surface_checkpoints ON surface_nodes (session, pos, seq, projection) "
        "WHERE projection >= 0 AND (projection & 2) = 2",
        # Per session: the surface's non-checkpoint messages and their UTF-8 bytes.
        """
        CREATE TABLE surface_sums (
            session     INTEGER PRIMARY KEY REFERENCES sessions (key) ON DELETE CASCADE,
            messages    INTEGER NOT NULL,
            bytes       INTEGER NOT NULL
        ) STRICT
        """,
        # Run as Python: _backfill_surfaces (as SQL it does nothing, which is right for a
        # database without sessions, e.g. a test's template).
        _BACKFILL,
    ),
    (
        # Full-text search (issue 18, core.search): the text of each user and assistant
        # message on the current surface (one row per message, never chunks), and an
        # FTS5 trigram index over it (case-insensitive substrings, CJK included). The
        # triggers keep the index in step with the rows; a deleted session's rows go by
        # the foreign key's cascade (which fires them too).
        """
        CREATE TABLE search_messages (
            id      INTEGER PRIMARY KEY,  -- the FTS5 rowid (stable across VACUUM)
            session INTEGER NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
            seq     INTEGER NOT NULL,
            text    TEXT    NOT NULL,
            UNIQUE (session, seq)
        ) STRICT
        """,
        # columnsize = 0: no row sizes kept (FTS5's own bm25 is not used: core.search
        # ranks), one table less written by every append.
        "CREATE VIRTUAL TABLE search_index USING fts5(text, content = 'search_messages', "
        "content_rowid = 'id', tokenize = 'trigram case_sensitive 0', columnsize = 0)",
        "CREATE TRIGGER search_messages_insert AFTER INSERT ON search_messages BEGIN "
        "INSERT INTO search_index (rowid, text) VALUES (new.id, new.text); END",
        "CREATE TRIGGER search_messages_delete AFTER DELETE ON search_messages BEGIN "
        "INSERT INTO search_index (search_index, rowid, text) "
        "VALUES ('delete', old.id, old.text); END",
        # Sessions whose messages are not indexed yet: every existing one. The store
        # indexes them when it opens (``_index_pending``, a few at a time, with progress).
        """
        CREATE TABLE search_pending (
            session INTEGER PRIMARY KEY REFERENCES sessions (key) ON DELETE CASCADE
        ) STRICT
        """,
        "INSERT INTO search_pending (session) SELECT key FROM sessions",
    ),
    (
        # Issue 17: every session has an owner (the OS user; sessions made before go to
        # the user who upgrades, through the connection's ``dsh_user()``) and may be
        # shared with other users. SQLite has no roles: the store enforces both, and
        # ``dsh migrate`` carries them to PostgreSQL, whose row security does.
        "ALTER TABLE sessions ADD COLUMN owner TEXT",
        "UPDATE sessions SET owner = dsh_user()",
        """
        CREATE TABLE shares (
            session  INTEGER NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
            grantee  TEXT    NOT NULL,
            PRIMARY KEY (session, grantee)
        ) STRICT, WITHOUT ROWID
        """,
        "CREATE INDEX shares_by_grantee ON shares (grantee, session)",
    ),
    (
        # Issue 15: the search index without positions (``detail = none``), half its size
        # on disk. FTS5 can then no longer match a phrase: a term is looked up as the AND
        # of its trigrams and every candidate is checked on its text (``search_messages``).
        # The rows (and their ids, the newest-first order of search) are kept; the index
        # is rebuilt from them (``_rebuild_search_index``, with progress).
        # From this version on, packs may also hold chunk runs, text or linked to their
        # reply (see ``_pack``), which a dsh of schema v6 cannot read: this step's number
        # makes it refuse the file ("newer than this dsh understands") instead of calling it
        # corrupt.
        "DROP TRIGGER search_messages_insert",
        "DROP TRIGGER search_messages_delete",
        "DROP TABLE search_index",
        "CREATE VIRTUAL TABLE search_index USING fts5(text, content = 'search_messages', "
        "content_rowid = 'id', tokenize = 'trigram case_sensitive 0', columnsize = 0, "
        "detail = none)",
        "CREATE TRIGGER search_messages_insert AFTER INSERT ON search_messages BEGIN "
        "INSERT INTO search_index (rowid, text) VALUES (new.id, new.text); END",
        "CREATE TRIGGER search_messages_delete AFTER DELETE ON search_messages BEGIN "
        "INSERT INTO search_index (search_index, rowid, text) "
        "VALUES ('delete', old.id, old.text); END",
        # Run as Python: _rebuild_search_index (as SQL it does nothing: right for a
        # database without messages).
        _REBUILD_SEARCH,
    ),
    (
        # Issue 15: single events are compressed against a preset dictionary
        # (``_DICTIONARY``, named in each row's zlib header), and a surface message's row
        # may keep its JSON without the text its search row holds (``_stored_message``),
        # neither of which a dsh of schema v7 can read: this step's number makes it
        # refuse the file ("newer than this dsh understands") instead of calling it
        # corrupt. Existing rows stay as they are and read as before.
        "SELECT 'dsh: rows may be compressed against the preset dictionary'",
        # The newest replace of a session (the floor of its unknown events) without
        # reading every surface row: a window's fold now comes from surface_nodes, and
        # only this stayed a walk of the whole surface. Replaces are few (compactions),
        # so the index is small.
        f"CREATE INDEX events_replaces ON events (session, seq) WHERE {_IS_REPLACE}",
        # A search row a message's row links to holds that message's only copy of its
        # text: deleting it first is refused (the store makes the row whole before it
        # drops one, ``_unlink_messages``); a deleted session's rows all go together (the
        # cascade runs after its sessions row is gone).
        "CREATE TRIGGER search_messages_linked BEFORE DELETE ON search_messages "
        "WHEN EXISTS (SELECT 1 FROM sessions WHERE key = old.session) AND EXISTS (SELECT 1 "
        "FROM events WHERE session = old.session AND seq = old.seq AND kind = 1 "
        f"AND {_is_linked('events')}) BEGIN SELECT RAISE(ABORT, 'dsh: a message row links "
        "to this text (make it whole first)'); END",
    ),
    (
        # Issue 15: no query reads events_surface any more. SQLite's planner walks the
        # primary key for the surface reads (read_surface_rows, read_surface_outline,
        # last_surface_seq), and surface_nodes serves the rest. The index cost 0.32
        # bytes per event on the storage benchmark and a page write per surface append.
        "DROP INDEX IF EXISTS events_surface",
    ),
    (
        # SPEC 4.1 (issue 31): a surrogate pair is its astral character, however written.
        # dsh wrote the two halves apart (escaped apart in JSON, surrogatepass bytes in
        # ids, cwds and types); rows holding one are written anew (stores.sqlite.pairs:
        # ids, cwds, types, single rows and packs, linked runs unlinked first), and their
        # sessions' projections, surface sums and search rows are made again. Run as
        # Python (as SQL it does nothing: right for a database without such rows).
        _MERGE_PAIRS,
    ),
    (
        # Issue 32: a session's profile and fork origin (core.log.SESSION_MARK_TYPES) are
        # read for every session at once (``read_latest_events``: ``dsh sessions``, the
        # sidebar), from an index of their rows alone, as titles are. Such an event is
        # stored in a row of its own from now on (never packed); one an older dsh packed
        # (an unknown type then: an imported log may hold them) is taken out of its pack
        # first (``_split_packed_marks``, run as Python: as SQL it does nothing, right for
        # a database without packs). A dsh of schema v10 would pack them again: this
        # step's number makes it refuse the file.
        _SPLIT_MARKS,
        f"CREATE INDEX events_marks ON events (session, type, seq) WHERE {_IS_MARK_V11}",
    ),
    (
        # Issue 33: where an imported session came from (``session/source``, seq 0) is
        # read for every session as its profile is, so it joins the marks: the index is
        # made again for the three types, and any source event an older dsh packed (an
        # unknown type then: an imported log may hold them) is taken out of its pack, as
        # step 11 did for its types. A dsh of schema v11 would pack them again: this
        # step's number makes it refuse the file.
        "DROP INDEX events_marks",
        _SPLIT_SOURCES,
        f"CREATE INDEX events_marks ON events (session, type, seq) WHERE {_IS_MARK}",
    ),
    (
        # Issue 36: the store adds an append's search rows to the FTS5 index itself, in
        # one ``INSERT … SELECT`` per batch (``_index_rows``), instead of this trigger's
        # statement per row (most of what the index cost an import: see
        # ``_index_rows``). The delete trigger stays. A dsh of schema v12 would leave its
        # appends unindexed: this step's number makes it refuse the file.
        "DROP TRIGGER search_messages_insert",
    ),
    (
        # Issue 36: search terms of one or two characters (no trigram holds them) are
        # looked up in an index of blocks of 64 search rows (stores.sqlite.shortgrams):
        # each block's distinct folded characters and pairs of characters, one document
        # (contentless, no positions) per block, its rowid the block's number. A block is
        # indexed once complete (``_index_short_grams``); the rows from ``size * blocks``
        # up are checked as they are. A row written again with an id below that (SQLite
        # gives the highest id again after the highest row went) is listed as loose, and
        # always checked. The index is built from the existing rows (run as Python, with
        # progress: as SQL it does nothing, right for a database without messages).
        "CREATE VIRTUAL TABLE short_grams USING fts5(grams, content = '', "
        "tokenize = 'ascii', detail = none, columnsize = 0)",
        "CREATE TABLE short_grams_state (size INTEGER NOT NULL, blocks INTEGER NOT NULL) STRICT",
        f"INSERT INTO short_grams_state (size, blocks) VALUES ({BLOCK}, 0)",
        "CREATE TABLE short_grams_loose (id INTEGER PRIMARY KEY) STRICT",
        "CREATE TRIGGER short_grams_reused AFTER INSERT ON search_messages "
        "WHEN new.id < (SELECT size * blocks FROM short_grams_state) BEGIN "
        "INSERT OR IGNORE INTO short_grams_loose (id) VALUES (new.id); END",
        _SHORT_GRAMS,
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)


_PAGE_SIZE = 8192


def _split_packed_marks(raw: sqlite3.Connection, marks: frozenset[str]) -> None:
    """Migrations to schema v11 (profiles, forks) and v12 (sources): take every event of
    a type of ``marks`` (of ``MARK_TYPES``) out of the pack an older dsh stored it in (to
    it an unknown type, packed like any small log event), so that ``events_marks`` finds
    it. Each such pack is read whole (its runs that point at a reply unlinked:
    ``_unpack_events``' text) and its events are written again as an append of them
    writes them now (``_insert_events``: the runs between the marks packed again, each
    mark a row of its own). The runs written again are text runs, no longer linked to
    their reply (a little more space, in the rare file that holds such a pack); every
    event reads back exactly as before. Most packs are looked at only as far as their
    header (``_pack_types``); one that does not decode is left as it is (its readers
    name the damage)."""
    found: list[tuple[int, int, int, bytes]] = []
    for key, first, n, blob in raw.execute(
        f"SELECT session, seq, n, data FROM events WHERE kind = {KIND_PACK}"
    ):
        try:
            if marks.isdisjoint(_pack_types(blob)):
                continue
        except (ValueError, TypeError, LookupError, zlib.error):
            continue
        found.append((key, first, n, blob))
    for key, first, n, blob in found:
        try:
            body = _unlinked(zlib.decompress(blob), first, None, _ReplyTexts.of(raw, key))
            types, times, lines, runs = _body_parts(body.decode("utf-8"))
            datas = _rebuild_lines(lines, runs)
            if not len(types) == len(times) == len(datas) == n:
                raise ValueError(f"a pack of {n} events holds {len(datas)}")
            batch = [
                ValidatedEvent(type_, loads_exact(text), text, None, None, time)
                for type_, time, text in zip(types, times, datas, strict=True)
            ]
        except (ValueError, TypeError, LookupError, zlib.error):
            continue
        raw.execute("DELETE FROM events WHERE session = ? AND seq = ?", (key, first))
        _insert_events(raw, key, first, SurfaceFolder(), batch, None)


class _SchemaMixin(_Access):
    """Setting up a connection and migrating its database to ``SCHEMA_VERSION``."""

    _migration_progress: Callable[[int, int], None] | None
    _index_progress: Callable[[int, int], None] | None

    async def _setup(self, busy_timeout: float) -> None:
        conn = self._live()
        try:
            await conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            await conn.execute("PRAGMA foreign_keys = ON")
            user = self._user
            await conn.create_function("dsh_user", 0, lambda: user)  # for migrations
            await conn.create_function("dsh_holds", 2, _holds, deterministic=True)  # search
            version = await self._user_version()
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self._path}: the database has schema version {version}, newer than this "
                    f"dsh understands ({SCHEMA_VERSION}); upgrade dsh"
                )
            if not self._read_only:
                if version == 0:
                    # Before the first table: a new database gets larger pages (packs and
                    # compressed messages are rows of a few KiB; less space is lost), and
                    # can give its free pages back to the file system (``_tidy``).
                    await conn.execute(f"PRAGMA page_size = {_PAGE_SIZE}")
                    await conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
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
                    if statement == _BACKFILL:
                        report = self._migration_progress
                        await conn._execute(_backfill_surfaces, conn._conn, report)  # type: ignore[no-untyped-call]
                        continue
                    if statement == _REBUILD_SEARCH:
                        await self._rebuild_search_index(conn)
                        continue
                    if statement == _MERGE_PAIRS:
                        from stores.sqlite.pairs import merge_stored_pairs

                        await conn._execute(merge_stored_pairs, conn._conn, self)  # type: ignore[no-untyped-call]
                        continue
                    if statement == _SHORT_GRAMS:
                        await self._rebuild_short_grams(conn)
                        continue
                    if statement in _MARKS_OF_STEP:
                        marks = _MARKS_OF_STEP[statement]
                        await conn._execute(_split_packed_marks, conn._conn, marks)  # type: ignore[no-untyped-call]
                        continue
                    await conn.execute(statement)
                await conn.execute(f"PRAGMA user_version = {step + 1}")
            await conn.execute("COMMIT")
            self._upgraded = version < SCHEMA_VERSION
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                await conn.execute("ROLLBACK")
            raise

    async def _rebuild_search_index(self, conn: aiosqlite.Connection) -> None:
        """Migration to schema v7: index every row of ``search_messages`` in the (new,
        empty) ``search_index``, ``_PENDING_PER_TRANSACTION`` sessions per step, reporting
        ``index_progress`` (sessions done, sessions in all) on the event loop after each
        (the words a host shows for indexing; a TUI's callback must not run on the
        connection's thread). All in the migration's transaction."""
        raw: sqlite3.Connection = conn._conn

        def sessions() -> list[int]:
            sql = "SELECT DISTINCT session FROM search_messages ORDER BY session"
            return [key for (key,) in raw.execute(sql)]

        def index(keys: list[int], last: bool) -> None:
            for key in keys:
                raw.execute(
                    "INSERT INTO search_index (rowid, text) "
                    "SELECT id, text FROM search_messages WHERE session = ?",
                    (key,),
                )
            if last:
                # One segment: the rebuild leaves many, and merging them a little at
                # every later append made those appends 3x slower for a while (200,000
                # messages: 1,300 instead of 3,700 messages/s; the merge takes 0.6 s).
                raw.execute("INSERT INTO search_index (search_index) VALUES ('optimize')")

        keys: list[int] = await conn._execute(sessions)  # type: ignore[no-untyped-call]
        report = self._index_progress
        for start in range(0, len(keys), _PENDING_PER_TRANSACTION):
            group = keys[start : start + _PENDING_PER_TRANSACTION]
            last = start + len(group) == len(keys)
            await conn._execute(index, group, last)  # type: ignore[no-untyped-call]
            if report is not None:
                report(start + len(group), len(keys))

    async def _rebuild_short_grams(self, conn: aiosqlite.Connection) -> None:
        """Migration to schema v14: index every complete block of ``search_messages`` in
        the (new, empty) ``short_grams``, ``_BLOCKS_PER_STEP`` blocks per step, reporting
        ``migration_progress`` (rows done, rows in all, counted by id) on the event loop
        after each when there are several; then merge the index into one segment. All in
        the migration's transaction."""
        raw: sqlite3.Connection = conn._conn
        size, complete = await conn._execute(_start_short_grams, raw)  # type: ignore[no-untyped-call]
        report = self._migration_progress if complete > _BLOCKS_PER_STEP else None
        for start in range(0, complete, _BLOCKS_PER_STEP):
            end = min(complete, start + _BLOCKS_PER_STEP)
            await conn._execute(_index_blocks, raw, size, start, end)  # type: ignore[no-untyped-call]
            if report is not None:
                report(end * size, complete * size)
        await conn._execute(raw.execute, _OPTIMIZE_SHORT_GRAMS)  # type: ignore[no-untyped-call]


_BLOCKS_PER_STEP = 200
"""Blocks of search rows indexed per step of migration 14 (12,800 rows)."""
_OPTIMIZE_SHORT_GRAMS = "INSERT INTO short_grams (short_grams) VALUES ('optimize')"
