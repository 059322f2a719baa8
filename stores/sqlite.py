"""``SqliteSessionStore``: the durable ``SessionStore`` on one SQLite file (aiosqlite).

Text the user controls (session ids, cwds, event types) is stored as a BLOB of its
``surrogatepass`` UTF-8 bytes: that round-trips every Python ``str`` (lone surrogates,
NUL…) and its byte order is code-point order, so ``ORDER BY id`` sorts like Python.
Event data is the JavaScript-identical JSON text from ``core.jsoncodec`` (always valid
UTF-8: surrogates are escaped) and is parsed back with ``loads_exact``.

Layout (schema v3): a session is known inside the file by an integer ``key``, not its
text id. Runs of plain log events (streamed chunks, turn ends: no surface op, not a
title, small data) are stored packed, many events to one row (``kind`` 3, ``n`` events
from ``seq``; see :func:`_pack`): zlib of a header line (types, times, chunk runs) and a
line per event, its data JSON text, or for a streamed text chunk only its text's escaped
contents (its turn, step and index are its run's, in the header: issue 15), or, once the
reply's ``assistant/message`` is appended, only its text's length: the run then points at
the message's text block, which holds the texts (a reply's text is stored once). Packs
written before chunk runs have a header of three fields and are read as they always
were; one extended by a later append is laid out anew, as one batch would write it. A
single payload of 128 characters or more is stored zlib-compressed against a preset
dictionary (``_DICTIONARY``, schema v8; a BLOB instead of TEXT), and a message on a
surface keeps its JSON without the text its search row holds (``_stored_message``;
readers select ``_data_sql``, which appends it, and put it back). Every event
keeps its seq, and reads return exactly what was appended (the differential and
migration tests compare them byte for byte).

A session's profile, fork origin and source (``core.log.SESSION_MARK_TYPES``: schema v11,
``session/source`` since v12) are never packed: each is a row of its own, kept in the
partial index ``events_marks``, so ``read_latest_events`` reads the newest of every
session as ``read_titles`` reads titles.

Beside the log, each append's transaction keeps the current surface of its session up to
date (``surface_nodes``: its nodes in order, with each one's projection code;
``surface_sums``: the count and UTF-8 bytes of its non-checkpoint messages), so
``read_message_tail`` reads the newest messages, the checkpoints and two sums instead of
folding every surface row (``prepare`` is then bounded by what retention keeps), and
``read_surface_nodes`` (a window's seqs, when a session is opened) reads the nodes' seqs
and the end of ``events_replaces`` (schema v8: an index of the replaces alone).

Search (schema v7, ``core.search``): ``search_messages`` holds the indexed text of each
message on a surface, ``search_index`` a trigram FTS5 index over it without positions
(``detail = none``: half the size of one with them), so a term is looked up as the AND of
its trigrams and each candidate checked on its text inside the same query.

Durability: WAL with ``synchronous = NORMAL``: a commit survives a crash of dsh, but a
power loss may drop the last commits (never corrupt the file).

Every operation is one transaction on one connection, serialised by an ``asyncio.Lock``;
writes use ``BEGIN IMMEDIATE`` so concurrent writers (other processes) queue on the busy
timeout instead of failing half-way, and a residual ``SQLITE_BUSY`` is retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import re
import sqlite3
import stat
import threading
import zlib
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Container, Iterable, Sequence
from dataclasses import replace
from itertools import accumulate, pairwise
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import aiosqlite

from core.batches import EventBatches
from core.config import default_database_path
from core.damage import DamagedRow
from core.errors import (
    DiskFullError,
    InvalidEventError,
    SessionExistsError,
    SessionNotFoundError,
    StoreError,
)
from core.gcpause import gc_paused
from core.jsoncodec import _encode_js, _speedups, dumps_js, loads_exact
from core.leases import ReplyLease, check_lease_ttl, lease_blocks
from core.limits import MAX_TITLE_EVENT_BYTES
from core.log import (
    ASSISTANT_MESSAGE,
    KNOWN_EVENT_TYPES,
    SESSION_FORK,
    SESSION_PROFILE,
    SESSION_SOURCE,
    SESSION_TITLE,
    Event,
    NewEvent,
    Replace,
    SessionHeader,
    SurfaceOp,
    SurfaceOutline,
    SurfaceRow,
    ValidatedEvent,
    build_event,
    build_events,
    is_known_event_type,
    now_ms,
)
from core.query import MessageTail, SessionTitle, TailWalk
from core.references.projection import MessageSums, projection_code
from core.search import (
    MAX_TERMS,
    MIN_INDEXED_TERM,
    RANK_WINDOW,
    SearchHit,
    check_search_limit,
    indexed_text,
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
from stores.progress import indexing_words, terminal_progress
from stores.sharing import check_grantee, check_owner, check_user, os_user
from stores.validation import (
    KIND_LOG,
    KIND_SURFACE,
    KIND_TITLE,
    MARK_TYPES,
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
    stored_title,
    validate_batch,
    validate_event,
)

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SqliteSessionStore"]

T = TypeVar("T")

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

_LINKED = b"\x01"
"""The first byte of a message row whose text is its search row's (``_stored_message``);
no other row's data begins with it (JSON text begins with ``{``, zlib with ``x``)."""


def _is_linked(table: str) -> str:
    """SQL: whether the row of ``events`` named ``table`` is a linked message row (its
    data begins with ``_LINKED``). The trigger of migration step 8 holds it: never change
    it."""
    return f"substr({table}.data,1,1) = x'{_LINKED.hex()}'"


def _blob(text: str) -> str:
    """SQL: the BLOB literal of ``text`` as a type is stored (``encode_text``)."""
    return f"x'{encode_text(text).hex()}'"


def _is_mark(types: Sequence[str]) -> str:
    """SQL: a single log row of one of ``types``, the WHERE of an ``events_marks`` index."""
    return f"kind = 0 AND ({' OR '.join(f'type = {_blob(t)}' for t in types)})"


_MARKS_OF_STEP: dict[str, frozenset[str]] = {
    _SPLIT_MARKS: frozenset({SESSION_PROFILE, SESSION_FORK}),
    _SPLIT_SOURCES: frozenset({SESSION_SOURCE}),
}
"""The mark types each splitting migration statement takes out of their packs (a new
mark type needs a step of its own: never change a released one)."""

_IS_MARK_V11 = _is_mark((SESSION_PROFILE, SESSION_FORK))
"""The WHERE of ``events_marks`` as migration step 11 wrote it: never change it."""

_IS_MARK = _is_mark((SESSION_PROFILE, SESSION_FORK, SESSION_SOURCE))
"""A single log row of a type of ``MARK_TYPES``: the WHERE of the ``events_marks`` index
since migration step 12 (never change it; a new mark type needs a step of its own, which
makes the index again and takes its stored events out of their packs too).
``latest_events_sql`` asks for one type with ``kind = 0 AND type = x'…'``, which SQLite
proves implies it (an ``IN`` list here would not be: the planner would walk the primary
key instead)."""

_IS_REPLACE = """kind = 1 AND surface_op <> '"append"'"""
"""A surface event that is not an append: the WHERE of the ``events_replaces`` index
(migration step 8 wrote it: never change it), and of the query that reads it
(``_NEWEST_REPLACES_SQL``), which SQLite uses only when its WHERE implies the index's."""

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
        # ids, cwds and types); rows holding one are written anew (stores.sqlite_pairs:
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
)
SCHEMA_VERSION = len(MIGRATIONS)


def _readable(alias: str) -> str:
    """The rows of ``sessions`` (as ``alias``) the store's user may read; its two
    parameters are that user (see ``SqliteSessionStore._readers``)."""
    return (
        f"({alias}.owner = ? OR EXISTS (SELECT 1 FROM shares AS g "
        f"WHERE g.session = {alias}.key AND g.grantee = ?))"
    )


_BUSY_TIMEOUT_S = 10.0
# How long a write keeps retrying an SQLITE_BUSY that escaped the busy handler.
_RETRY_WINDOW_S = 30.0
# Ids per statement in ``read_titles`` (well under SQLITE_MAX_VARIABLE_NUMBER).
_IN_CHUNK = 500


def _data_sql(table: str) -> str:
    """The ``data`` of a row of ``events`` (named ``table`` in the query) as readers take
    it: a message row linked to its search row (``_LINKED``, see ``_stored_message``) gets
    that row's text appended, so ``_text`` can rebuild its JSON (NULL when the search row
    is missing: a damaged file, which ``_text`` names). No ", " inside: callers split
    column lists on it."""
    return (
        f"CASE WHEN {_is_linked(table)} THEN CAST({table}.data || (SELECT "
        f"CAST(m.text AS BLOB) FROM search_messages AS m WHERE m.session = {table}.session "
        f"AND m.seq = {table}.seq) AS BLOB) ELSE {table}.data END"
    )


_DATA = _data_sql("events")
_EVENT_COLUMNS = f"seq, n, type, time, kind, {_DATA}, surface_op, source_event_seqs"
_SEQS_PER_QUERY = 500
"""Seqs bound per ``IN (…)`` (well under SQLite's 32,766 host parameters)."""
# ``read_events_at`` reads the whole range of rows between the first and the last seq
# wanted when it spans at most twice as many seqs as are wanted, plus this.
_SPAN_SLACK = 16
# Its parameters: the session id, the two of ``_readable``, the last seq, the first.
_SPAN_SQL = (
    f"WITH k AS (SELECT key FROM sessions AS s WHERE id = ? AND {_readable('s')}) "
    f"SELECT e.seq, e.n, e.type, e.time, e.kind, {_data_sql('e')}, e.surface_op, "
    "e.source_event_seqs FROM k, events AS e "
    "WHERE e.session = k.key AND e.seq <= ? AND e.seq >= coalesce((SELECT f.seq FROM "
    "events AS f WHERE f.session = k.key AND f.seq <= ? ORDER BY f.seq DESC LIMIT 1), 0) "
    "ORDER BY e.seq"
)

_INT64_MAX = 2**63 - 1

KIND_PACK = 3
"""``kind`` of a row holding a packed run of ``n`` log events (see :func:`_pack`)."""
_PACK_MAX_EVENTS = 512
_PACK_MAX_BYTES = 64 * 1024
"""A pack holds at most this many events and this much JSON (so extending one, or
reading one event of it, stays cheap)."""
_PACK_EVENT_MAX = 2048
"""Larger events are stored in a row of their own."""
_COMPRESS_MIN = 128
"""A single event's JSON of at least this many characters is stored zlib-compressed
(when that is smaller)."""
_ZLIB_LEVEL = 6
_DICTIONARY = (
    # What the messages dsh writes have in common (core.log, core.engine), the most
    # frequent last (deflate reaches back least far for those): a preset dictionary lets
    # even a short message's skeleton compress, 15 % off the message rows of the storage
    # benchmark (schema v8). Never change it: a row names it by its Adler-32 (zlib's
    # FDICT header), and a new one needs a new name beside it.
    b'{"type":"tool-call","id":"call_","name":"","arguments":"{\\"'
    b'{"type":"tool-result","toolCallId":"call_","content":[{"type":"text","text":"'
    b'"}],"isError":false}'
    b'"source":{"kind":"session-reference","version":1,"references":[{"sessionId":"'
    b'"label":"","capturedThroughSeq":,"compacted":false,"originalMessages":'
    b',"retainedMessages":,"omittedMessages":0,"omittedBytes":0,"truncated":false,'
    b'"inputIndex":0}]}'
    b'"interrupted":true,"error":{"kind":"","message":"'
    b'"source":{"kind":"plugin","plugin":"compact"}'
    b'"usage":{"prompt_tokens":,"completion_tokens":,"total_tokens":}'
    b'"source":{"kind":"model","provider":"openai","model":"deepseek-chat"}'
    b'"provider":"offline","model":"offline"}},"finish":"completed"'
    b'{"turn":1,"step":0,"message":{"id":"","role":"assistant","content":'
    b'[{"type":"reasoning","text":"'
    b'{"id":"","role":"user","content":[{"type":"text","text":"'
    b'"}],"source":{"kind":"user"}}'
)
_DICTIONARY_ID = zlib.adler32(_DICTIONARY).to_bytes(4, "big")
_PAGE_SIZE = 8192
_PENDING_PER_TRANSACTION = 20
"""Sessions indexed per transaction when a database is upgraded to the search index."""


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

    # ------------------------------------------------------------------ lifecycle

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
                        from stores.sqlite_pairs import merge_stored_pairs

                        await conn._execute(merge_stored_pairs, conn._conn, self)  # type: ignore[no-untyped-call]
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

    def current_user(self) -> str:
        """Who this store acts as: the owner of what it creates."""
        return self._user

    async def _require_session(self, conn: aiosqlite.Connection, session_id: str) -> SessionHeader:
        rows = list(
            await conn.execute_fetchall(
                f"SELECT created_at, cwd, owner FROM sessions AS s WHERE id = ? AND {_readable('s')}",
                (encode_text(session_id), *self._readers),
            )
        )
        if not rows:
            raise SessionNotFoundError(session_id)
        created_at, cwd, owner = rows[0]
        return SessionHeader(
            id=session_id,
            created_at=created_at,
            cwd=None if cwd is None else decode_text(cwd),
            owner=owner,
        )

    def _session(self, raw: sqlite3.Connection, session_id: str) -> tuple[int, SessionHeader]:
        """The key and header of a session the user may read (``SessionNotFoundError``
        when there is none, or the user may not read it: no existence leak)."""
        row = raw.execute(
            f"SELECT key, created_at, cwd, owner FROM sessions AS s WHERE id = ? AND {_readable('s')}",
            (encode_text(session_id), *self._readers),
        ).fetchone()
        if row is None:
            raise SessionNotFoundError(session_id)
        key, created_at, cwd, owner = row
        return key, SessionHeader(
            id=session_id,
            created_at=created_at,
            cwd=None if cwd is None else decode_text(cwd),
            owner=owner,
        )

    def _own(self, raw: sqlite3.Connection, session_id: str) -> tuple[int, SessionHeader]:
        """Like ``_session``, for a write: a session the user may read but does not own
        is ``SessionReadOnlyError``."""
        key, header = self._session(raw, session_id)
        check_owner(session_id, header.owner, self._user)
        return key, header

    def _decode_events(
        self,
        rows: list[Any],
        wanted: Container[int] | None = None,
        replies: _ReplyTexts | None = None,
    ) -> list[Event]:
        """Decode ``rows``, releasing each raw row as soon as its event exists (so the raw
        text and the decoded events of a large session are not both held in full).

        The hot loop of every large read: a handful of distinct types are decoded once,
        and an append (nearly every surface event) skips the op parser."""
        out: list[Event] = []
        append = out.append
        types: dict[bytes, str] = {}
        loads = loads_exact
        build = build_event
        if replies is not None:
            replies.hold(rows)
        try:
            for i, (seq, n, raw_type, time, kind, data, surface_op, source_seqs) in enumerate(rows):
                if kind == KIND_PACK:
                    out += _unpack_events(seq, n, data, wanted, replies)
                    rows[i] = None
                    continue
                value = None if replies is None else replies.value(seq, data)
                if value is None:
                    value = loads(data if data.__class__ is str else _text(data))
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
                append(build(seq, type_, time, value, op, seqs))
                rows[i] = None
        except (ValueError, TypeError, zlib.error) as err:
            raise StoreError(f"{self._path}: a stored event is corrupt ({err})") from err
        return out

    def _decode_surface_rows(self, rows: list[Any]) -> list[SurfaceRow]:
        return decode_surface_rows(rows, self._path)

    # ------------------------------------------------------------------ writes

    async def create_session(
        self,
        session_id: str | None = None,
        *,
        cwd: str | None = None,
        created_at: int | None = None,
    ) -> SessionHeader:
        header = replace(new_header(session_id, cwd, created_at), owner=self._user)

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
        def body(raw: sqlite3.Connection) -> list[Event]:
            self._own(raw, session_id)
            row = raw.execute(_APPEND_HEAD_SQL, (encode_text(session_id),)).fetchone()
            if row is None:
                raise SessionNotFoundError(session_id)
            key, last_seq, last_n, last_kind, last_data = row
            if not batch:
                return []
            first = 0 if last_seq is None else last_seq + last_n
            folder: SurfaceFolder[None] = SurfaceFolder()
            if batch_has_replace(batch):
                surface = raw.execute(
                    "SELECT seq, surface_op, source_event_seqs FROM events "
                    f"WHERE session = ? AND kind = {KIND_SURFACE} ORDER BY seq",
                    (key,),
                )
                for seq, op, seqs in surface:
                    folder.apply(
                        seq, decode_op(op), None if seqs is None else decode_seqs(seqs), None
                    )
            open_pack = (last_seq, last_n, last_data) if last_kind == KIND_PACK else None
            try:
                return _insert_events(raw, key, first, folder, batch, open_pack)
            except _DamagedPack as err:
                raise StoreError(f"{self._path}: a stored event is corrupt ({err})") from err

        return await self._run_sync(body, write=True)

    async def import_session(
        self, header: SessionHeader, events: Sequence[NewEvent] | EventBatches
    ) -> SessionHeader:
        """Create a session with exactly this header and log (seqs from 0), all or nothing.

        A taken id raises ``SessionExistsError``; a bad event ``InvalidEventError``.
        """
        checked = replace(import_header(header), owner=header.owner or self._user)
        batch = [] if isinstance(events, EventBatches) else validate_batch(events)

        def body(raw: sqlite3.Connection) -> SessionHeader:
            key = _insert_session_sync(raw, checked)
            folder: SurfaceFolder[None] = SurfaceFolder()
            first = len(_insert_events(raw, key, 0, folder, batch, None))
            # More batches (read on this thread, the store's, not the event loop's),
            # each continuing the last pack as an append would.
            while isinstance(events, EventBatches) and (more := events.next_batch()) is not None:
                row = raw.execute(_APPEND_HEAD_SQL, (encode_text(checked.id),)).fetchone()
                open_pack = (row[1], row[2], row[4]) if row[3] == KIND_PACK else None
                first += len(
                    _insert_events(raw, key, first, folder, validate_batch(more), open_pack)
                )
            return checked

        return await self._run_sync(body, write=True)

    async def delete_session(self, session_id: str) -> None:
        sid = check_session_id(session_id)

        async def body(conn: aiosqlite.Connection) -> None:
            header = await self._require_session(conn, sid)
            check_owner(sid, header.owner, self._user)
            cursor = await conn.execute("DELETE FROM sessions WHERE id = ?", (encode_text(sid),))
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
        ttl = check_lease_ttl(ttl_ms)

        def body(raw: sqlite3.Connection) -> bool:
            key, _ = self._own(raw, sid)
            now = now_ms()
            # BEGIN IMMEDIATE (a write) makes the check and the take one step for every process.
            for held, expires_at in raw.execute(
                "SELECT owner, expires_at FROM reply_leases WHERE session = ?", (key,)
            ).fetchall():
                if lease_blocks(held, expires_at, owner, now, dead):
                    return False
            raw.execute(
                "INSERT OR REPLACE INTO reply_leases (session, owner, expires_at) VALUES (?, ?, ?)",
                (key, owner, now + ttl),
            )
            return True

        return await self._run_sync(body, write=True)

    async def release_reply_lease(self, session_id: str, owner: str) -> None:
        sid = check_session_id(session_id)

        async def body(conn: aiosqlite.Connection) -> None:
            await conn.execute(
                "DELETE FROM reply_leases WHERE owner = ? AND session = "
                "(SELECT key FROM sessions WHERE id = ?)",
                (owner, encode_text(sid)),
            )

        await self._run(body, write=True)

    async def renew_reply_lease(self, session_id: str, owner: str, *, ttl_ms: int) -> bool:
        sid = check_session_id(session_id)
        ttl = check_lease_ttl(ttl_ms)

        def body(raw: sqlite3.Connection) -> bool:
            key, _ = self._own(raw, sid)
            return (
                raw.execute(
                    "UPDATE reply_leases SET expires_at = ? WHERE session = ? AND owner = ?",
                    (now_ms() + ttl, key, owner),
                ).rowcount
                > 0
            )

        return await self._run_sync(body, write=True)

    async def read_reply_lease(self, session_id: str) -> ReplyLease | None:
        sid = check_session_id(session_id)

        def body(raw: sqlite3.Connection) -> ReplyLease | None:
            key, _ = self._own(raw, sid)
            row = raw.execute(
                "SELECT owner, expires_at FROM reply_leases WHERE session = ?", (key,)
            ).fetchone()
            return None if row is None else ReplyLease(row[0], row[1] - now_ms())

        return await self._run_sync(body, write=False)

    async def break_reply_lease(self, session_id: str) -> bool:
        sid = check_session_id(session_id)

        def body(raw: sqlite3.Connection) -> bool:
            key, _ = self._own(raw, sid)
            return raw.execute("DELETE FROM reply_leases WHERE session = ?", (key,)).rowcount > 0

        return await self._run_sync(body, write=True)

    def damaged_rows(self) -> tuple[DamagedRow, ...]:
        return self._damaged

    # ------------------------------------------------------------------ sharing

    async def share(self, session_id: str, user: str) -> bool:
        sid = check_session_id(session_id)
        grantee = check_user(user)

        def body(raw: sqlite3.Connection) -> bool:
            key, _ = self._own(raw, sid)
            check_grantee(grantee, self._user)
            cursor = raw.execute(
                "INSERT OR IGNORE INTO shares (session, grantee) VALUES (?, ?)", (key, grantee)
            )
            return cursor.rowcount > 0

        return await self._run_sync(body, write=True)

    async def unshare(self, session_id: str, user: str) -> bool:
        sid = check_session_id(session_id)
        grantee = check_user(user)

        def body(raw: sqlite3.Connection) -> bool:
            key, _ = self._own(raw, sid)
            check_grantee(grantee, self._user)
            cursor = raw.execute(
                "DELETE FROM shares WHERE session = ? AND grantee = ?", (key, grantee)
            )
            return cursor.rowcount > 0

        return await self._run_sync(body, write=True)

    async def list_shares(self, session_id: str | None = None) -> list[Share]:
        sid = None if session_id is None else check_session_id(session_id)

        def body(raw: sqlite3.Connection) -> list[Share]:
            # As the database shows them: grants on one's own sessions, and one's own grants.
            mine = "(s.owner = ? OR g.grantee = ?)"
            if sid is None:
                rows = raw.execute(
                    "SELECT s.id, s.owner, g.grantee FROM shares AS g "
                    f"JOIN sessions AS s ON s.key = g.session WHERE {mine} "
                    "ORDER BY s.created_at DESC, s.id, g.grantee",
                    self._readers,
                ).fetchall()
            else:
                key, _ = self._session(raw, sid)
                rows = raw.execute(
                    "SELECT s.id, s.owner, g.grantee FROM shares AS g "
                    f"JOIN sessions AS s ON s.key = g.session WHERE s.key = ? AND {mine} "
                    "ORDER BY g.grantee",
                    (key, *self._readers),
                ).fetchall()
            return [Share(decode_text(i), owner or "", grantee) for i, owner, grantee in rows]

        return await self._run_sync(body, write=False)

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

        def body(raw: sqlite3.Connection) -> int | None:
            key, _ = self._session(raw, sid)
            (last,) = raw.execute(
                f"SELECT max(seq) FROM events WHERE session = ? AND kind = {KIND_SURFACE}",
                (key,),
            ).fetchone()
            return None if last is None else int(last)

        return await self._run_sync(body, write=False)

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
                f"SELECT id, created_at, cwd, owner FROM sessions AS s WHERE {_readable('s')} "
                "ORDER BY created_at DESC, id",
                self._readers,
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

    async def read_header(self, session_id: str) -> SessionHeader:
        sid = check_session_id(session_id)

        async def body(conn: aiosqlite.Connection) -> SessionHeader:
            return await self._require_session(conn, sid)

        return await self._run(body, write=False)

    async def read_events(self, session_id: str) -> list[Event]:
        sid = check_session_id(session_id)

        def body(raw: sqlite3.Connection) -> list[Event]:
            key, _ = self._session(raw, sid)
            rows = raw.execute(
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE session = ? ORDER BY seq", (key,)
            ).fetchall()
            # Decoded on the connection's thread: off the event loop; the events are
            # acyclic, so the cyclic collector's passes over them would be pure overhead.
            with gc_paused():
                return self._decode_events(rows, None, _ReplyTexts.of(raw, key))

        return await self._run_sync(body, write=False)

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

        def body(raw: sqlite3.Connection) -> tuple[SessionHeader, int | None, tuple[int, ...], int]:
            key, header = self._session(raw, sid)
            last = _last_seq(raw, key)
            # One range of surface_nodes' primary key (the table itself: WITHOUT ROWID),
            # already in node order: no event row is read and nothing is folded.
            rows = raw.execute(_NODE_SEQS_SQL, (key,)).fetchall()
            return header, last, tuple([seq for (seq,) in rows]), self._newest_replace(raw, key)

        return await self._run_sync(body, write=False)

    def _newest_replace(self, raw: sqlite3.Connection, key: int) -> int:
        """The seq of the session's newest replace, ``-1`` without one: the last entry of
        ``events_replaces`` (its op decoded, so a stored op that does not decode is a
        ``StoreError`` here as in a fold)."""
        cursor = raw.execute(_NEWEST_REPLACES_SQL, (key,))
        try:
            for seq, op in cursor:
                if decode_op(op) != "append":
                    return int(seq)
            return -1
        except (ValueError, TypeError) as err:
            raise StoreError(f"{self._path}: a stored event is corrupt ({err})") from err
        finally:
            cursor.close()

    async def read_surface_tail(
        self, session_id: str, count: int
    ) -> tuple[SessionHeader, int | None, list[SurfaceRow]]:
        sid = check_session_id(session_id)
        limit = check_count(count)

        def body(raw: sqlite3.Connection) -> tuple[SessionHeader, int | None, list[SurfaceRow]]:
            key, header = self._session(raw, sid)
            rows = raw.execute(
                "SELECT seq, surface_op, source_event_seqs FROM events "
                f"WHERE session = ? AND kind = {KIND_SURFACE} ORDER BY seq DESC LIMIT ?",
                (key, limit),
            ).fetchall()
            rows.reverse()
            return header, _last_seq(raw, key), self._decode_surface_rows(rows)

        return await self._run_sync(body, write=False)

    async def read_surface_outline(
        self, session_id: str
    ) -> tuple[SessionHeader, int | None, list[SurfaceOutline]]:
        sid = check_session_id(session_id)

        def body(raw: sqlite3.Connection) -> tuple[SessionHeader, int | None, list[SurfaceOutline]]:
            key, header = self._session(raw, sid)
            last = _last_seq(raw, key)
            # The primary key's walk, reading each surface row for these columns.
            rows = raw.execute(
                "SELECT seq, surface_op, source_event_seqs, projection FROM events "
                f"WHERE session = ? AND kind = {KIND_SURFACE} ORDER BY seq",
                (key,),
            ).fetchall()
            return header, last, self._decode_outline(raw, key, rows)

        return await self._run_sync(body, write=False)

    def _decode_outline(
        self, raw: sqlite3.Connection, key: int, rows: list[Any]
    ) -> list[SurfaceOutline]:
        try:
            return _outline_rows(raw, key, rows)
        except (ValueError, TypeError, zlib.error) as err:
            raise StoreError(f"{self._path}: a stored event is corrupt ({err})") from err

    async def read_message_tail(
        self, session_id: str, budget: int
    ) -> tuple[SessionHeader, int | None, MessageTail]:
        sid = check_session_id(session_id)
        limit = check_count(budget)

        def body(raw: sqlite3.Connection) -> tuple[SessionHeader, int | None, MessageTail]:
            key, header = self._session(raw, sid)
            last = _last_seq(raw, key)
            walk = TailWalk(limit)
            # Newest first along surface_messages; stops once the budget is spent.
            cursor = raw.execute(
                "SELECT pos, seq, projection FROM surface_nodes "
                "WHERE session = ? AND projection >= 0 ORDER BY pos DESC",
                (key,),
            )
            for pos, seq, code in cursor:
                if walk.take(pos, seq, code):
                    break
            cursor.close()
            if not walk.exceeded:
                return header, last, walk.tail()
            checkpoints = raw.execute(
                "SELECT seq, projection FROM surface_nodes WHERE session = ? "
                "AND projection >= 0 AND (projection & 2) = 2 AND pos < ? ORDER BY pos",
                (key, walk.start),
            ).fetchall()
            row = raw.execute(
                "SELECT messages, bytes FROM surface_sums WHERE session = ?", (key,)
            ).fetchone()
            messages, size = (0, 0) if row is None else row
            return header, last, walk.tail(checkpoints, messages, size)

        return await self._run_sync(body, write=False)

    async def _read_surface(
        self, session_id: str, columns: str, decode: Callable[[list[Any]], list[T]]
    ) -> tuple[SessionHeader, int | None, list[T]]:
        """Header, last raw seq and the surface rows (``columns``) in one read transaction;
        the rows are decoded off the event loop."""
        sid = check_session_id(session_id)

        def body(raw: sqlite3.Connection) -> tuple[SessionHeader, int | None, list[T]]:
            key, header = self._session(raw, sid)
            last = _last_seq(raw, key)
            rows = raw.execute(
                f"SELECT {columns} FROM events WHERE session = ? AND kind = {KIND_SURFACE} "
                "ORDER BY seq",
                (key,),
            ).fetchall()
            return header, last, decode(rows)

        return await self._run_sync(body, write=False)

    async def read_events_at(self, session_id: str, seqs: Sequence[int]) -> list[Event]:
        sid = check_session_id(session_id)
        wanted = check_seqs(seqs)

        wanted_set = set(wanted)

        def body(raw: sqlite3.Connection) -> list[Event]:
            distinct = sorted(wanted_set)
            if distinct and distinct[-1] - distinct[0] <= 2 * len(distinct) + _SPAN_SLACK:
                # Dense (the last events of a log, a page of them): one statement (its
                # own transaction) reads the range of rows from the one covering the
                # first seq wanted, keeping those that hold one; not a lookup per seq
                # and another per covering pack.
                span = raw.execute(
                    _SPAN_SQL, (encode_text(sid), *self._readers, distinct[-1], distinct[0])
                ).fetchall()
                if not span:
                    self._session(raw, sid)  # SessionNotFoundError when it is that
                count = len(distinct)
                rows: list[Any] = []
                for row in span:
                    at = bisect_left(distinct, row[0])
                    if at < count and distinct[at] < row[0] + row[1]:
                        rows.append(row)
                return self._decode_events(rows, wanted_set, self._replies_by_id(raw, sid))
            raw.execute("BEGIN")
            key, _ = self._session(raw, sid)
            return self._decode_events(
                _rows_at(raw, key, distinct, _EVENT_COLUMNS), wanted_set, _ReplyTexts.of(raw, key)
            )

        by_seq = {
            event.seq: event for event in await self._run_sync(body, write=False, begin=False)
        }
        for seq in wanted:
            if seq not in by_seq:
                raise missing_seq_error(sid, seq)
        return [by_seq[seq] for seq in wanted]

    def _replies_by_id(self, raw: sqlite3.Connection, session_id: str) -> _ReplyTexts:
        """``_ReplyTexts`` of a session known by its id (a read outside a transaction:
        when the session was deleted meanwhile, that is ``SessionNotFoundError``)."""
        sql = (
            f"SELECT e.kind, e.type, {_data_sql('e')} FROM sessions AS s JOIN events AS e "
            f"ON e.session = s.key WHERE s.id = ? AND {_readable('s')} AND e.seq = ?"
        )
        params = (encode_text(session_id), *self._readers)
        return _ReplyTexts(
            lambda seq: raw.execute(sql, (*params, seq)).fetchone(),
            lambda: self._session(raw, session_id),
        )

    async def read_bodies_at(self, session_id: str, seqs: Sequence[int]) -> list[tuple[str, Any]]:
        sid = check_session_id(session_id)
        wanted = check_seqs(seqs)
        wanted_set = set(wanted)

        def body(raw: sqlite3.Connection) -> dict[int, tuple[str, Any]]:
            key, _ = self._session(raw, sid)
            return _bodies_at(raw, key, sorted(wanted_set), self._path)

        found = await self._run_sync(body, write=False)
        for seq in wanted:
            if seq not in found:
                raise missing_seq_error(sid, seq)
        return [found[seq] for seq in wanted]

    async def read_unknown_events(
        self, session_id: str, after: int = -1, through: int | None = None
    ) -> list[Event]:
        sid = check_session_id(session_id)
        low, high = check_seq_range(after, through)
        top = _INT64_MAX if high is None else high
        known = sorted(encode_text(t) for t in KNOWN_EVENT_TYPES)

        def body(raw: sqlite3.Connection) -> list[Event]:
            key, _ = self._session(raw, sid)
            if top <= low:
                return []
            # Single log rows of an unknown type, and every pack (a pack may hold any
            # small log event): one range of the primary key, plus the pack that may
            # start at or before ``after`` and reach into the range.
            rows = raw.execute(
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE session = ? AND seq > ? "
                f"AND seq <= ? AND (kind = {KIND_PACK} OR (kind = {KIND_LOG} "
                f"AND type NOT IN ({', '.join('?' * len(known))}))) ORDER BY seq",
                (key, low, top, *known),
            ).fetchall()
            if low >= 0:
                before = raw.execute(
                    f"SELECT {_EVENT_COLUMNS} FROM events WHERE session = ? AND seq <= ? "
                    "ORDER BY seq DESC LIMIT 1",
                    (key, low),
                ).fetchone()
                if before is not None and before[4] == KIND_PACK and before[0] + before[1] > low:
                    rows.insert(0, before)
            out: list[Event] = []
            singles: list[Any] = []
            try:
                for row in rows:
                    if row[4] != KIND_PACK:
                        singles.append(row)
                        continue
                    first, n, blob = row[0], row[1], row[5]
                    if all(is_known_event_type(t) for t in _pack_types(blob)):
                        continue  # the usual pack: streamed chunks, turn ends
                    types = _pack_parts(blob)[0]
                    wanted = {
                        first + i
                        for i, type_ in enumerate(types)
                        if low < first + i <= top and not is_known_event_type(type_)
                    }
                    if wanted:
                        out += _unpack_events(first, n, blob, wanted, _ReplyTexts.of(raw, key))
            except (ValueError, TypeError, zlib.error) as err:
                raise StoreError(f"{self._path}: a stored event is corrupt ({err})") from err
            out += self._decode_events(singles)
            out.sort(key=lambda event: event.seq)
            return out

        return await self._run_sync(body, write=False)

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
        out, damaged = await asyncio.to_thread(self._build_titles, rows)
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

        def select(id_count: int | None) -> str:
            where = (
                ""
                if id_count is None
                else " AND session IN (SELECT key FROM sessions "
                f"WHERE id IN ({', '.join('?' * id_count)}))"
            )
            return sql(where) + f" WHERE {_readable('s')}"

        async def body(conn: aiosqlite.Connection) -> tuple[tuple[int, int], Any, list[Any]]:
            key, cached = await self._listing_key(conn, name)
            if wanted is None and cached is not None:
                return key, cached, []
            if wanted is None:
                queries: Iterable[tuple[str, list[bytes | str]]] = [
                    (select(None), [*self._readers])
                ]
            else:
                queries = (
                    (select(len(chunk)), [*(encode_text(sid) for sid in chunk), *self._readers])
                    for chunk in (
                        wanted[i : i + _IN_CHUNK] for i in range(0, len(wanted), _IN_CHUNK)
                    )
                )
            rows: list[Any] = []
            for sql_text, params in queries:
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
        out = await asyncio.to_thread(self._build_latest, rows)
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

    async def search_messages(self, query: str, *, limit: int = 20) -> list[SearchHit]:
        terms = search_terms(query)
        wanted = check_search_limit(limit)
        if not terms:
            return []
        long_terms = [t for t in terms if len(t) >= MIN_INDEXED_TERM]
        short_terms = [t for t in terms if len(t) < MIN_INDEXED_TERM]
        wide = [_like_superset(t) for t in long_terms]
        sql = _search_sql([w is not None for w in wide], len(short_terms))
        params: list[Any] = []
        if long_terms:
            params.append(" AND ".join(_fts_query(t) for t in long_terms))
            params += [like for like in wide if like is not None]
        params += [like_pattern(t) for t in short_terms]
        params += long_terms  # each checked whole on the text, last (see _search_sql)
        params += self._readers
        # Short terms only: the newest matches are the result (a few spare rows: every
        # hit is checked by core.search.matches, which may fold case differently).
        params.append(RANK_WINDOW if long_terms else wanted + 16)

        def body(raw: sqlite3.Connection) -> list[tuple[str, int, str]]:
            return [(decode_text(sid), seq, text) for sid, seq, text in raw.execute(sql, params)]

        found = await self._run_sync(body, write=False)
        # Ranking (BM25 counts and highlight spans over whole texts) takes seconds for a
        # common word over large messages: off the connection, so other calls proceed.
        return await asyncio.to_thread(rank_hits, found, terms, wanted)

    async def unindexed_sessions(self) -> int:
        """How many sessions the user may read await indexing: an upgrade's backlog, left
        while the database is opened read-only (``search_messages`` cannot find them
        yet; a host says so, see ``core.search.unindexed_notice``)."""
        sql = (
            "SELECT count(*) FROM search_pending AS p JOIN sessions AS s ON s.key = p.session "
            f"WHERE {_readable('s')}"
        )

        def count(raw: sqlite3.Connection) -> int:
            return int(raw.execute(sql, self._readers).fetchone()[0])

        return await self._run_sync(count, write=False)

    async def _index_pending(self, progress: Callable[[int, int], None] | None) -> None:
        """Index the sessions of ``search_pending`` (those of a database upgraded from
        before the search index), ``_PENDING_PER_TRANSACTION`` at a time; ``progress``
        gets (sessions done, sessions in all) after each transaction."""

        def count(raw: sqlite3.Connection) -> int:
            return int(raw.execute("SELECT count(*) FROM search_pending").fetchone()[0])

        total = await self._run_sync(count, write=False)
        if not total or self._read_only:
            return

        def step(raw: sqlite3.Connection) -> int:
            keys = [
                row[0]
                for row in raw.execute(
                    "SELECT session FROM search_pending LIMIT ?", (_PENDING_PER_TRANSACTION,)
                )
            ]
            for key in keys:
                _reindex_session(raw, self, key)
                raw.execute("DELETE FROM search_pending WHERE session = ?", (key,))
            return len(keys)

        done = 0
        while done < total:
            indexed = await self._run_sync(step, write=True)
            if not indexed:
                break
            done += indexed
            if progress is not None:
                progress(min(done, total), total)

    async def read_last_event_times(self) -> dict[str, int]:
        async def body(conn: aiosqlite.Connection) -> tuple[tuple[int, int], Any, list[Any]]:
            key, cached = await self._listing_key(conn, "last_event_times")
            if cached is not None:
                return key, cached, []
            return (
                key,
                None,
                list(
                    await conn.execute_fetchall(
                        f"{LAST_EVENT_TIMES_SQL} WHERE {_readable('s')}", self._readers
                    )
                ),
            )

        key, cached, rows = await self._run(body, write=False)
        if cached is not None:
            return dict(cached)
        out = await asyncio.to_thread(
            lambda: {decode_text(sid): time for sid, time in rows if time is not None}
        )
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


_INSERT_SESSION_SQL = "INSERT INTO sessions (id, created_at, cwd, owner) VALUES (?, ?, ?, ?)"


def _session_params(header: SessionHeader) -> tuple[bytes, int | None, bytes | None, str | None]:
    return (
        encode_text(header.id),
        header.created_at,
        None if header.cwd is None else encode_text(header.cwd),
        header.owner,
    )


async def _insert_session(conn: aiosqlite.Connection, header: SessionHeader) -> None:
    try:
        await conn.execute(_INSERT_SESSION_SQL, _session_params(header))
    except sqlite3.IntegrityError as err:
        raise SessionExistsError(header.id) from err


def _insert_session_sync(raw: sqlite3.Connection, header: SessionHeader) -> int:
    """Insert the session; its new key."""
    try:
        cursor = raw.execute(_INSERT_SESSION_SQL, _session_params(header))
    except sqlite3.IntegrityError as err:
        raise SessionExistsError(header.id) from err
    key = cursor.lastrowid
    assert key is not None
    return key


_APPEND_HEAD_SQL = (
    "SELECT s.key, e.seq, e.n, e.kind, CASE WHEN e.kind = 3 THEN e.data END "
    "FROM sessions AS s LEFT JOIN events AS e ON e.session = s.key "
    "AND e.seq = (SELECT max(seq) FROM events WHERE session = s.key) WHERE s.id = ?"
)
"""A session's key and its last row (seq, n, kind, and its data when it is a pack)."""

_INSERT_EVENT_SQL = (
    "INSERT INTO events (session, seq, n, type, time, kind, data, surface_op, "
    "source_event_seqs, projection) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


_NODE_SEQS_SQL = "SELECT seq FROM surface_nodes WHERE session = ? ORDER BY pos"
"""A session's current surface, seqs in node order (``read_surface_nodes``)."""
_NEWEST_REPLACES_SQL = (
    f"SELECT seq, surface_op FROM events WHERE session = ? AND {_IS_REPLACE} ORDER BY seq DESC"
)
"""A session's replaces, newest first, through ``events_replaces`` (its WHERE implies
the index's, so the planner reads the index backwards; tests/stores assert the plan)."""


def _last_seq(raw: sqlite3.Connection, key: int) -> int | None:
    row = raw.execute(
        "SELECT seq + n - 1 FROM events WHERE session = ? ORDER BY seq DESC LIMIT 1", (key,)
    ).fetchone()
    return None if row is None else int(row[0])


def _text(data: str | bytes | None) -> str:
    """A stored single event's JSON text, from its ``data`` as ``_data_sql`` selects it
    (a BLOB is its zlib-compressed UTF-8, or a message linked to its search row)."""
    if data.__class__ is str:
        return data
    if data is None:
        raise ValueError("a message's text is missing (its row in search_messages is gone)")
    if data[:1] == _LINKED:
        return _linked_text(data)  # type: ignore[arg-type]
    return _inflate(data)  # type: ignore[arg-type]


_LINK_MIN = 32
"""Texts shorter than this are stored in the row as before (a link costs 13 bytes)."""


def _stored_message(text_json: str, indexed: str | None) -> str | bytes:
    """What a single event's JSON (``text_json``) is stored as when ``indexed``, the text
    its search row holds, is written in the same transaction: when that text, escaped as
    ``dumps_js`` escapes it, is a part of the JSON, the row keeps the JSON without it and
    where it was (a message's text is then stored once, issue 15). Layout: ``_LINKED``,
    the offset (code points into the JSON), the size of the rest and the UTF-8 size of
    the text (4 bytes each, big endian: a reader that did not append the text, or a
    search row that changed, is damage, not an empty text), then the rest as
    ``_stored_data`` stores it (compressed, or its UTF-8). Readers get the search row's
    text appended (``_data_sql``) and put it back at the offset: the very JSON that was
    appended, whichever occurrence was taken out."""
    if indexed is None or len(indexed) < _LINK_MIN:
        return _stored_data(text_json)
    escaped = dumps_js(indexed)[1:-1]
    at = text_json.rfind(escaped)
    if at < 0:
        return _stored_data(text_json)  # e.g. several text blocks, or a NUL replaced
    rest = _stored_data(text_json[:at] + text_json[at + len(escaped) :])
    body = rest if rest.__class__ is bytes else rest.encode("utf-8")  # type: ignore[union-attr]
    sizes = (at, len(body), len(indexed.encode("utf-8")))
    return _LINKED + b"".join(n.to_bytes(4, "big") for n in sizes) + body


def _linked_text(data: bytes) -> str:
    """The JSON of a linked message row (see ``_stored_message``), its search row's text
    appended to it. Damage raises ``ValueError`` (or ``zlib.error``)."""
    if len(data) < 13:
        raise ValueError("a linked message row is too short")
    at = int.from_bytes(data[1:5], "big")
    size = int.from_bytes(data[5:9], "big")
    text_size = int.from_bytes(data[9:13], "big")
    if 13 + size + text_size != len(data):
        raise ValueError(
            f"a linked message row is not the {size} bytes it says and a text of "
            f"{text_size} (its search row's text is missing or not its own)"
        )
    body = data[13 : 13 + size]
    rest = _inflate(body) if body[:1] == b"x" else body.decode("utf-8")
    if at > len(rest):
        raise ValueError(f"a linked message row puts its text at {at}, past its end")
    text = data[13 + size :].decode("utf-8")
    return rest[:at] + dumps_js(text)[1:-1] + rest[at:]


def _title_text(data: str | bytes | None) -> str:
    """A title row's JSON text (``_text``), inflated no further than a title event may
    hold: a row written by hand cannot make a listing decompress a bomb."""
    if not isinstance(data, bytes) or data[:1] == _LINKED:
        return _text(data)  # (a value of another type is a TypeError there)
    bound = MAX_TITLE_EVENT_BYTES + 1
    if len(data) >= 6 and data[1] & 0x20:
        if data[2:6] != _DICTIONARY_ID:
            raise ValueError(f"compressed with an unknown dictionary (id {data[2:6].hex()})")
        inflater = zlib.decompressobj(zdict=_DICTIONARY)
    else:
        inflater = zlib.decompressobj()
    raw = inflater.decompress(data, bound)
    if len(raw) >= bound:
        raise ValueError(
            f"it holds more than the {MAX_TITLE_EVENT_BYTES:,} bytes a title event may hold"
        )
    if not inflater.eof or inflater.unused_data:
        raise ValueError("its compressed data is corrupt")
    return raw.decode("utf-8")


def _inflate(data: bytes) -> str:
    """A compressed single event's JSON text: a zlib stream, with the preset dictionary
    ``_DICTIONARY`` when its header says so (FDICT and that dictionary's id)."""
    if len(data) < 6 or not data[1] & 0x20:
        return zlib.decompress(data).decode("utf-8")
    if data[2:6] != _DICTIONARY_ID:
        raise ValueError(f"compressed with an unknown dictionary (id {data[2:6].hex()})")
    inflater = zlib.decompressobj(zdict=_DICTIONARY)
    raw = inflater.decompress(data)
    if not inflater.eof or inflater.unused_data:
        raise ValueError("a compressed event is truncated or has bytes after its end")
    return raw.decode("utf-8")


def _stored_data(text: str) -> str | bytes:
    """What a single event's JSON is stored as: itself, or compressed (against the
    preset dictionary ``_DICTIONARY``) when that saves a tenth of it."""
    if len(text) < _COMPRESS_MIN:
        return text
    raw = text.encode("utf-8")
    deflater = zlib.compressobj(_ZLIB_LEVEL, zdict=_DICTIONARY)
    packed = deflater.compress(raw) + deflater.flush()
    return packed if len(packed) < len(raw) * 0.9 else text


def _pack(types: Sequence[str], times: Sequence[int], datas: Sequence[str]) -> bytes:
    """A run of log events as one zlib-compressed BLOB.

    Uncompressed it is lines: a JSON header ``[types, index, times]`` or
    ``[types, index, times, runs]`` (the distinct types; ``0`` when there is one, else
    each event's index into them; the first time then each event's difference from the
    one before; the chunk runs, see below), then one line per event (JSON text never
    holds a raw newline). A header of three means no runs: every line is the event's data
    JSON text (the only layout before chunk runs, still read as it was).

    A chunk run ``[start, count, turn, step, index]`` (non-overlapping, in order) says
    that lines ``start .. start + count - 1`` hold only the escaped contents ``X`` of the
    chunk texts of events whose data JSON text is exactly
    ``{"turn":T,"step":S,"chunk":{"type":"text-delta","index":I,"text":"X"}}`` with
    ``T = turn``, ``S = step`` and ``I = index + k`` on the run's ``k``-th line (see
    ``_CHUNK_LINE``): a streamed reply's skeleton is stored once instead of on every
    line, and zlib sees the texts side by side (issue 15: 44 % smaller packs). A reader
    rebuilds each such line's text (``_chunk_line``) and parses it like any other.

    A linked run ``[start, count, turn, step, index, seq, block, offset, size]`` is such
    a run whose texts are not stored at all: they are consecutive slices of the text of
    block ``block`` of the ``assistant/message`` at ``seq`` (of the same session), from
    code point ``offset`` on, and the run's ``k``-th line holds only the length of the
    ``k``-th text in code points (decimal); ``size`` is the length of their escaped
    contents together (what bounds a pack, without reading the message). The append of
    that message links the runs of its turn and step in the packs right before it, as
    far back as each holds such a run (``_reply_packs``: the batch's, the open one, and
    those stored before it, so a long streamed reply is linked whole and paced appends
    write what one batch writes; ``_link_runs``: only when the texts joined are exactly
    a part of the block, and ``dumps_js`` of each text gives back its line), so a
    finished reply's text is stored once, in its message. A reader unlinks the run
    first (``_unlink_runs``: the slices, escaped by ``dumps_js`` as the append escaped
    them, make the very lines of the text run again), then reads it as a text run. A
    link to no row, to a row that is not an assistant message, to a block that is not
    text, or lengths that overrun the text are damage (``ValueError``). ``_pack`` itself
    writes text runs only.
    """
    lines: list[str] = []
    runs: list[list[int]] = []
    _add_lines(lines, runs, datas)
    return _pack_blob(types, times, lines, runs)


_DIGITS = r"(0|-?[1-9][0-9]{0,17})"
_CHUNK_LINE = re.compile(
    r'\{"turn":' + _DIGITS + r',"step":' + _DIGITS
    + r',"chunk":\{"type":"text-delta","index":' + _DIGITS
    + r',"text":"([^"\\]*+(?:\\.[^"\\]*+)*+)"\}\}'
)  # fmt: skip
"""The data JSON text of a streamed text chunk as ``dumps_js`` writes it: its turn,
step and index (canonical ints of at most 18 digits: ``str(int(x)) == x``, and every
index of a run fits a C ``long long``) and its text's escaped contents (one JSON string's
inside: no raw quote, no raw newline)."""


def _chunk_line(turn: int, step: int, index: int, chars: str) -> str:
    """The data JSON text a chunk run's line ``chars`` stands for (``_CHUNK_LINE``)."""
    return (
        f'{{"turn":{turn},"step":{step},"chunk":{{"type":"text-delta","index":{index},'
        f'"text":"{chars}"}}}}'
    )


def _add_lines(lines: list[str], runs: list[list[int]], datas: Iterable[str]) -> None:
    """Add events' data JSON texts to the lines and runs of a pack (see ``_pack``): a
    streamed text chunk joins the last run when it continues it (same turn and step, the
    next index, on the next line), else opens a run; any other text is a line as it is.
    Adding texts in several calls gives what one call with all of them gives (so a pack
    extended by paced appends is the pack one batch writes)."""
    match = _CHUNK_LINE.fullmatch
    last = runs[-1] if runs else None
    for text in datas:
        found = match(text)
        if found is None:
            lines.append(text)
            continue
        turn, step, index, chars = found.groups()
        t, s, i = int(turn), int(step), int(index)
        if (
            last is not None
            and len(last) == 5
            and last[0] + last[1] == len(lines)
            and last[4] + last[1] == i
            and last[2] == t
            and last[3] == s
        ):
            last[1] += 1
        else:
            last = [len(lines), 1, t, s, i]
            runs.append(last)
        lines.append(chars)


def _pack_blob(
    types: Sequence[str], times: Sequence[int], lines: list[str], runs: list[list[int]]
) -> bytes:
    table = list(dict.fromkeys(types))
    if len(table) == 1:
        index: int | list[int] = 0
    else:
        position = {t: i for i, t in enumerate(table)}
        index = [position[t] for t in types]
    deltas = [times[0], *(b - a for a, b in pairwise(times))]
    header: list[Any] = (
        [table, index, deltas, runs] if runs or not _plain_types(table) else [table, index, deltas]
    )
    return zlib.compress(
        (_pack_header(header) + "\n" + "\n".join(lines)).encode("utf-8"), _ZLIB_LEVEL
    )


def _pack_header(header: list[Any]) -> str:
    """A pack's header line: ``json.dumps(header, separators=(",", ":"))`` when every type
    is printable ASCII (written by the C encoder of ``dumps_js``, which then agrees: both
    escape only the quote and the backslash; it skips a per-int ``repr`` of the times),
    else ``dumps_js`` (non-ASCII kept as it is, each lone surrogate escaped on its own:
    ``_header_fields`` reads it back exactly). Such a header always has four fields."""
    if _plain_types(header[0]):
        text = _encode_js(header, False) if _encode_js is not None else None
        if text is not None:
            return text  # type: ignore[no-any-return]
        return json.dumps(header, separators=(",", ":"))
    return dumps_js(header)


def _plain_types(table: Iterable[str]) -> bool:
    """Whether every type of a pack's table is printable ASCII: its header is then
    ``json.dumps``' (three fields without runs), else ``dumps_js``' (four, see above)."""
    return all(t.isascii() and t.isprintable() for t in table)


def _header_fields(text: str) -> Any:
    """A pack's header line parsed. A header of four fields (chunk runs, or a type that
    is not printable ASCII: ``_pack_header``) is read as ``loads_exact`` reads (a pair is
    its character, SPEC §4.1: types are merged when appended, and the schema v10 upgrade
    merged those stored before), so a type holding lone surrogates comes back as it went in. A header
    of three with escapes in it was written before schema v7 by ``json.dumps``, which
    escaped every non-ASCII character and so wrote an astral character and the pair of
    lone surrogates alike: it is read as it always was (``json.loads``, pairs merged)."""
    fields = loads_exact(text, frozen=False)
    if "\\" in text and (fields.__class__ is not list or len(fields) != 4):
        return json.loads(text)
    return fields


def _pack_parts(blob: bytes) -> tuple[list[str], list[int], list[str], list[list[int]]]:
    """The types, times, stored lines and chunk runs of a pack (a run's lines still hold
    only their texts' contents, or their lengths; see ``_pack``). Anything but a pack
    ``_pack`` could have written raises ``ValueError`` (or ``TypeError``, ``zlib.error``)."""
    return _body_parts(_inflate(blob))


def _body_parts(text: str) -> tuple[list[str], list[int], list[str], list[list[int]]]:
    """``_pack_parts`` of an inflated pack."""
    header, body = text.split("\n", 1)
    fields = _header_fields(header)
    runs: list[list[int]] = []
    if fields.__class__ is list and len(fields) == 4:
        runs = fields.pop()
        if runs.__class__ is not list:
            raise ValueError("a pack's chunk runs are not a list")
    table, index, deltas = fields
    times = list(accumulate(deltas))
    types = [table[0]] * len(times) if index == 0 else [table[i] for i in index]
    lines = body.split("\n")
    end = 0
    for run in runs:
        if (
            run.__class__ is not list
            or len(run) not in (5, 9)
            or any(x.__class__ is not int for x in run)
            or run[0] < end
            or run[1] < 1
            or (len(run) == 9 and min(run[5:]) < 0)
        ):
            raise ValueError(f"an unexpected chunk run in a pack: {run!r}")
        end = run[0] + run[1]
    if end > len(lines):
        raise ValueError(f"a pack's chunk runs reach line {end} of {len(lines)}")
    return types, times, lines, runs


def _rebuild_lines(
    lines: list[str], runs: list[list[int]], picked: Iterable[int] | None = None
) -> list[str]:
    """The data JSON text of each event of a pack from its stored lines (only of the
    lines ``picked``, in order, when given)."""
    if not runs:
        return lines if picked is None else [lines[i] for i in picked]
    out = list(lines)
    for start, count, turn, step, index in runs:
        for k in range(count):
            out[start + k] = _chunk_line(turn, step, index + k, lines[start + k])
    return out if picked is None else [out[i] for i in picked]


def _pack_types(blob: bytes) -> list[str]:
    """The distinct types of a pack, decompressing only as far as its header line (a
    pack of streamed chunks is not inflated whole just to learn it holds chunks): the
    header's first field in both layouts (with and without chunk runs)."""
    inflater = zlib.decompressobj()
    head = b""
    data = blob
    while b"\n" not in head:
        if not data and not inflater.unconsumed_tail:
            break
        head += inflater.decompress(inflater.unconsumed_tail or data, 4096)
        data = b""
    table = _header_fields(head.split(b"\n", 1)[0].decode("utf-8"))[0]
    return [str(t) for t in table]


class _ReplyTexts:
    """The text blocks of the replies a read's chunk runs point at (see ``_pack``), each
    reply's row fetched and decoded once per read. A run pointing at no row, at a row
    that is not an assistant message, or at a block that is not text is ``ValueError``
    (the read names the file)."""

    __slots__ = ("_contents", "_fetch", "_gone", "_held", "_values")
    # How a reply's stored JSON is read (the schema v10 upgrade reads rows written before
    # it as they were written: ``loads_unmerged``).
    _loads: Callable[[str], Any] | None = None  # None: the module's loads_exact

    def __init__(
        self,
        fetch: Callable[[int], tuple[int, bytes, str | bytes] | None],
        gone: Callable[[], object] | None = None,
    ) -> None:
        self._fetch = fetch  # (kind, type, data) of the session's row at a seq
        self._gone = gone  # raises SessionNotFoundError when the session went meanwhile
        self._contents: dict[int, list[Any]] = {}
        self._held: dict[int, tuple[int, bytes, str | bytes]] = {}  # see ``hold``
        self._values: dict[int, tuple[str | bytes, Any]] = {}  # see ``value``

    def hold(self, rows: Iterable[Any]) -> None:
        """The read's own rows (``_EVENT_COLUMNS``): a reply among them is taken from
        here instead of being fetched again (a whole read holds every reply, after the
        packs pointing at it)."""
        for row in rows:
            if row[4] == KIND_SURFACE and row[2] == _ASSISTANT_MESSAGE_TYPE:
                self._held[row[0]] = (row[4], row[2], row[5])

    def value(self, seq: int, data: str | bytes) -> Any:
        """The decoded data of the row at ``seq`` holding ``data`` when a run took its
        texts from it, else ``None``: a read decodes each reply once (a decoded value is
        frozen, so the event may share it). The read is done with that row: neither is
        kept (a read holds no more raw rows than it did)."""
        self._held.pop(seq, None)
        found = self._values.pop(seq, None)
        return found[1] if found is not None and found[0] == data else None

    @classmethod
    def of(cls, raw: sqlite3.Connection, key: int) -> _ReplyTexts:
        """The replies of the session with this key."""
        sql = f"SELECT kind, type, {_DATA} FROM events WHERE session = ? AND seq = ?"
        return cls(lambda seq: raw.execute(sql, (key, seq)).fetchone())

    def __call__(self, seq: int, block: int) -> str:
        content = self._contents.get(seq)
        if content is None:
            row = self._held.get(seq) or self._fetch(seq)
            if row is None:
                if self._gone is not None:
                    self._gone()
                raise ValueError(f"a chunk run points at event {seq}, which is not stored")
            kind, raw_type, data = row
            if kind != KIND_SURFACE or raw_type != _ASSISTANT_MESSAGE_TYPE:
                raise ValueError(f"a chunk run points at event {seq}, not an assistant message")
            decoded = (self._loads or loads_exact)(_text(data))
            self._values[seq] = (data, decoded)
            message = decoded.get("message") if isinstance(decoded, dict) else None
            content = message.get("content") if isinstance(message, dict) else None
            if not isinstance(content, list):
                raise ValueError(f"a chunk run points at event {seq}, which has no content")
            self._contents[seq] = content
        found = content[block] if block < len(content) else None
        text = found.get("text") if isinstance(found, dict) else None
        if found is None or found.get("type") != "text" or text.__class__ is not str:
            raise ValueError(f"a chunk run points at block {block} of event {seq}: not a text")
        return text


_ASSISTANT_MESSAGE_TYPE = encode_text(ASSISTANT_MESSAGE)


def _unlink_runs(
    body: bytes,
    first: int,
    wanted: Container[int] | None,
    replies: _ReplyTexts | None,
    escape: Callable[[list[str]], list[str]] | None = None,
) -> bytes:
    """An inflated pack whose chunk runs that point at a reply (see ``_pack``) are text
    runs again: each line's text is its slice of the reply's text block, escaped by
    ``dumps_js`` as the append escaped the chunk's text (the append linked the run only
    when those were the very texts of its lines), and the run loses its last four
    fields. A linked run none of whose seqs is ``wanted`` gets empty texts instead (no
    reader looks at them). Any other pack is returned as it is. (``escape``: how the
    append escaped the texts, ``_escaped_pieces`` by default.)"""
    newline = body.find(b"\n")
    if newline < 3 or body[newline - 3 : newline] != b"]]]":
        return body  # no chunk runs (a header's runs field is its last, a list of lists)
    fields = loads_exact(body[:newline].decode("utf-8"))  # lists are FrozenLists
    if (
        not isinstance(fields, list)
        or len(fields) != 4
        or not isinstance(fields[0], list)
        or any(t.__class__ is not str for t in fields[0])
        or not isinstance(fields[3], list)
        or all(not isinstance(run, list) or len(run) != 9 for run in fields[3])
    ):
        return body  # no linked run (or no pack: the reader says how)
    lines = body[newline + 1 :].decode("utf-8").split("\n")
    runs = list(fields[3])
    for r, run in enumerate(runs):
        if not isinstance(run, list) or len(run) != 9:
            continue
        if any(x.__class__ is not int for x in run) or min(run[5:]) < 0 or run[0] < 0:
            raise ValueError(f"an unexpected chunk run in a pack: {run!r}")
        start, count, _turn, _step, _index, seq, block, offset, size = run
        if count < 1 or start + count > len(lines):
            raise ValueError(f"a pack's chunk runs reach line {start + count} of {len(lines)}")
        if wanted is not None and not any(first + start + k in wanted for k in range(count)):
            lines[start : start + count] = [""] * count
        else:
            if replies is None:
                raise ValueError(f"a chunk run points at event {seq}, which this read cannot see")
            text = replies(seq, block)
            stored = ",".join(lines[start : start + count])
            lengths = loads_exact("[" + stored + "]")  # ValueError when not JSON
            if len(lengths) != count or set(map(type, lengths)) != {int} or min(lengths) < 0:
                raise ValueError(f"a chunk run's lengths are not lengths: {stored[:40]!r}")
            bounds = list(accumulate(lengths, initial=offset))
            if bounds[-1] > len(text):
                raise ValueError(
                    f"a chunk run reaches code point {bounds[-1]} of a text of {len(text)} "
                    f"(event {seq})"
                )
            escaped = (escape or _escaped_pieces)([text[a:b] for a, b in pairwise(bounds)])
            if sum(map(len, escaped)) != size:
                raise ValueError(f"a chunk run's texts are not the {size} characters it says")
            lines[start : start + count] = escaped
        runs[r] = list(run[:5])
    header = [fields[0], fields[1], fields[2], runs]
    return (_pack_header(header) + "\n" + "\n".join(lines)).encode("utf-8")


def _escaped_pieces(pieces: list[str]) -> list[str]:
    """Each text as ``dumps_js`` escapes it, without its quotes: one encoding of them all
    split at the '","' between them, unless that is found inside a text too (after a
    backslash: an escaped quote then a comma, as in a chunk ending in '",'), when each is
    escaped alone. Inside an escaped text every quote follows a backslash, so a split
    with no '\\","' anywhere is the right one."""
    joined = dumps_js(pieces)[2:-2]
    if '\\","' in joined:
        return [dumps_js(piece)[1:-1] for piece in pieces]
    return joined.split('","')


def _unpack_events(
    first: int,
    n: int,
    blob: bytes,
    wanted: Container[int] | None = None,
    replies: _ReplyTexts | None = None,
) -> list[Event]:
    """The pack's events (only those whose seq is in ``wanted``, when given); its chunk
    runs that point at a reply take their texts from ``replies`` (``_unlink_runs``).

    ``core._speedups.unpack_events`` decodes them in one C pass where it is built (chunk
    runs included: it rebuilds each run line's text, then parses it); it declines
    (``ValueError``) any pack but the plain ones ``_pack`` writes, which then take the
    reference path (``_py_unpack_events``: its value, or its error)."""
    body = _unlinked(zlib.decompress(blob), first, wanted, replies)
    if _C_UNPACK_EVENTS is not None:
        try:
            return _C_UNPACK_EVENTS(first, n, body, wanted)
        except ValueError:
            pass
    return _py_unpack_body(first, n, body, wanted)


_C_UNPACK_EVENTS: Callable[[int, int, bytes, Container[int] | None], list[Event]] | None = getattr(
    _speedups, "unpack_events", None
)


def _unlinked(
    body: bytes, first: int, wanted: Container[int] | None, replies: _ReplyTexts | None
) -> bytes:
    """``_unlink_runs`` of the inflated pack: by ``core._speedups.unlink_runs`` where it
    is built (the very bytes, in one C pass over the lines, each text escaped straight
    into UTF-8); it declines (``ValueError``) the packs the store does not write, damaged
    ones among them, which then take the reference path (its value, or its error)."""
    if _C_UNLINK_RUNS is not None:
        try:
            return _C_UNLINK_RUNS(body, first, wanted, replies)
        except ValueError:
            pass
    return _unlink_runs(body, first, wanted, replies)


_C_UNLINK_RUNS: Callable[[bytes, int, Container[int] | None, _ReplyTexts | None], bytes] | None = (
    getattr(_speedups, "unlink_runs", None)
)


def _py_unpack_events(
    first: int,
    n: int,
    blob: bytes,
    wanted: Container[int] | None = None,
    replies: _ReplyTexts | None = None,
) -> list[Event]:
    """``_unpack_events`` in Python: the reference of the C version."""
    body = _unlink_runs(zlib.decompress(blob), first, wanted, replies)
    return _py_unpack_body(first, n, body, wanted)


def _py_unpack_body(
    first: int, n: int, body: bytes, wanted: Container[int] | None = None
) -> list[Event]:
    """``_py_unpack_events`` of an inflated pack without linked runs."""
    types, times, lines, runs = _body_parts(body.decode("utf-8"))
    if any(len(run) != 5 for run in runs):
        raise ValueError("a pack's chunk run points at a reply this read did not resolve")
    build = build_event
    if wanted is not None:
        if len(lines) != n or len(types) != n:
            raise ValueError(f"a pack of {n} events holds {len(lines)}")
        picked = [i for i in range(n) if first + i in wanted]
        datas = loads_exact("[" + ",".join(_rebuild_lines(lines, runs, picked)) + "]")
        return [
            build(first + i, types[i], times[i], data, None, None)
            for i, data in zip(picked, datas, strict=True)
        ]
    datas = loads_exact("[" + ",".join(_rebuild_lines(lines, runs)) + "]")
    if not (len(types) == len(datas) == n):
        raise ValueError(f"a pack of {n} events holds {len(datas)}")
    return [
        build(first + i, type_, time, data, None, None)
        for i, (type_, time, data) in enumerate(zip(types, times, datas, strict=True))
    ]


def _rows_at(raw: sqlite3.Connection, key: int, seqs: list[int], columns: str) -> list[Any]:
    """The rows holding the session's events with these seqs (sorted, distinct), each row
    once: looked up by seq, then the pack covering each seq left (one lookup per pack).
    ``columns`` (SQL) begin with ``seq, n``; a seq that does not exist has no row."""
    rows: list[Any] = []
    for start in range(0, len(seqs), _SEQS_PER_QUERY):
        chunk = seqs[start : start + _SEQS_PER_QUERY]
        rows += raw.execute(
            f"SELECT {columns} FROM events WHERE session = ? "
            f"AND seq IN ({', '.join('?' * len(chunk))})",
            (key, *chunk),
        ).fetchall()
    found = {row[0] for row in rows}
    # The rest are inside packs: fetch each covering pack once.
    covered = -1
    for seq in seqs:
        if seq in found or seq <= covered:
            continue
        row = raw.execute(
            f"SELECT {columns} FROM events WHERE session = ? AND seq <= ? "
            "ORDER BY seq DESC LIMIT 1",
            (key, seq),
        ).fetchone()
        if row is None or row[0] in found:
            continue
        found.add(row[0])
        covered = row[0] + row[1] - 1
        if covered >= seq:
            rows.append(row)
    return rows


def _bodies_at(
    raw: sqlite3.Connection, key: int, seqs: list[int], path: Path
) -> dict[int, tuple[str, Any]]:
    """``read_bodies_at``'s read: the ``(type, data)`` of the session's events with these
    seqs (sorted, distinct) that exist, by seq; the source seqs are never read."""
    out: dict[int, tuple[str, Any]] = {}
    types: dict[bytes, str] = {}
    wanted = set(seqs)
    replies = _ReplyTexts.of(raw, key)
    try:
        for seq, n, raw_type, kind, data in _rows_at(
            raw, key, seqs, f"seq, n, type, kind, {_DATA}"
        ):
            if kind == KIND_PACK:
                for event in _unpack_events(seq, n, data, wanted, replies):
                    out[event.seq] = (event.type, event.data)
                continue
            type_ = types.get(raw_type)
            if type_ is None:
                type_ = types[raw_type] = decode_text(raw_type)
            out[seq] = (type_, loads_exact(_text(data)))
    except (ValueError, TypeError, zlib.error) as err:
        raise StoreError(f"{path}: a stored event is corrupt ({err})") from err
    return out


def _insert_events(
    raw: sqlite3.Connection,
    key: int,
    first: int,
    folder: SurfaceFolder[None],
    batch: Sequence[ValidatedEvent],
    open_pack: tuple[int, int, bytes] | None,
) -> list[Event]:
    """Check ``batch`` against ``folder`` (see ``check_batch``), then insert it from seq
    ``first``; the caller's transaction makes it all or nothing.

    Consecutive packable events (log-only, small, neither a title nor a session mark:
    ``events_title`` and ``events_marks`` index single rows) are stored as packs; a run
    that starts the batch first fills ``open_pack`` (the session's last row, ``(seq, n,
    blob)``, when it is a pack ending right before ``first``), which is rewritten in
    place.
    """
    check_batch(folder, first, batch)
    events = build_events(first, list(batch))
    title = SESSION_TITLE
    kinds = [
        KIND_LOG
        if v.surface_op is None and v.type != title
        else event_kind(v.type, v.data, v.surface_op is not None)
        for v in batch
    ]
    # The projection code of each surface event, by its index in the batch.
    codes = {i: projection_code(events[i]) for i, v in enumerate(batch) if v.surface_op is not None}
    # The text each surface event's search row holds (the rows link to it), by index.
    texts = {i: indexed_text(events[i]) for i in codes} if SEARCH_INDEX else {}
    pack_max = _PACK_EVENT_MAX
    marks = MARK_TYPES  # each in a row of its own (``events_marks``)
    packable = [
        kind == KIND_LOG and len(v.data_json) <= pack_max and v.type not in marks
        for kind, v in zip(kinds, batch, strict=True)
    ]
    rows: list[tuple[Any, ...]] = []
    drafts: list[_PackDraft] = []  # the packs this batch writes
    opened: _PackDraft | None = None  # the open pack, when read
    extended = False  # whether this batch added events to it
    i, count = 0, len(batch)
    while i < count:
        v = batch[i]
        if not packable[i]:
            rows.append(
                (
                    key,
                    first + i,
                    1,
                    encode_text(v.type),
                    v.time,
                    kinds[i],
                    _stored_message(
                        v.data_json, texts.get(i) if kinds[i] == KIND_SURFACE else None
                    ),
                    None if v.surface_op is None else encode_op(v.surface_op),
                    None if v.source_event_seqs is None else encode_seqs(v.source_event_seqs),
                    codes.get(i),
                )
            )
            i += 1
            continue
        end = i + 1
        while end < count and packable[end]:
            end += 1
        if i == 0 and open_pack is not None and open_pack[1] < _PACK_MAX_EVENTS:
            opened = _open_draft(open_pack, first)
            if opened is not None:
                i = _fill_draft(opened, batch, end)
                extended = i > 0
        while i < end:
            stop, size = i, 0
            while stop < end and stop - i < _PACK_MAX_EVENTS:
                size += len(batch[stop].data_json) + 1
                if size > _PACK_MAX_BYTES and stop > i:
                    break
                stop += 1
            run = batch[i:stop]
            if len(run) == 1:
                rows.append(
                    (
                        key,
                        first + i,
                        1,
                        encode_text(run[0].type),
                        run[0].time,
                        KIND_LOG,
                        _stored_data(run[0].data_json),
                        None,
                        None,
                        None,
                    )
                )
            else:
                draft = _PackDraft(first + i, [e.type for e in run], [e.time for e in run])
                _add_lines(draft.lines, draft.runs, [e.data_json for e in run])
                drafts.append(draft)
                rows.append(
                    (
                        key,
                        first + i,
                        len(run),
                        encode_text(run[0].type),
                        run[-1].time,
                        KIND_PACK,
                        draft,  # its blob once the batch's messages are linked
                        None,
                        None,
                        None,
                    )
                )
            i = stop
    replies = [
        (first + j, v.data)
        for j, v in enumerate(batch)
        if v.type == ASSISTANT_MESSAGE and v.surface_op == "append"
    ]
    stored: dict[int, _PackDraft | None] = {}  # the stored packs before the open one read
    if replies:
        if opened is None and open_pack is not None:
            with contextlib.suppress(_DamagedPack):  # left as it is: reads name the damage
                opened = _open_draft(open_pack, first)
        for reply in replies:
            _link_runs(_reply_packs(raw, key, rows, opened, stored, *reply), [reply])
    if opened is not None and (extended or opened.linked):
        raw.execute(
            "UPDATE events SET n = ?, time = ?, data = ? WHERE session = ? AND seq = ?",
            (len(opened.types), opened.times[-1], opened.blob(), key, opened.first),
        )
    for earlier in stored.values():
        if earlier is not None and earlier.linked:
            raw.execute(
                "UPDATE events SET data = ? WHERE session = ? AND seq = ?",
                (earlier.blob(), key, earlier.first),
            )
    if drafts:
        rows = [row if row[6].__class__ is not _PackDraft else _with_blob(row) for row in rows]
    raw.executemany(_INSERT_EVENT_SQL, rows)
    _track_surface(raw, key, first, batch, codes)
    _index_events(raw, key, events, folder, texts)
    return events


_TIDY_MAX_BLOCKS = 1024
"""The largest search index (in FTS5 blocks of at most 4,050 bytes) that ``_tidy``
merges into one segment when a store closes: about 0.13 s of work on the machines dsh is
measured on (0.126 ms a block)."""
_TIDY_MERGE_BLOCKS = 64
"""Blocks written by one ``merge`` step of ``_tidy`` (each step is its own transaction)."""
_TIDY_FREE_PAGES = 2048
"""The most free pages ``_tidy`` gives back when a store closes (16 MiB, about 0.15 s:
0.07 ms a page on the benchmark's database); the rest go at later closes."""


def _tidy(raw: sqlite3.Connection, upgraded: bool = False) -> None:
    """What a store that wrote (or ``upgraded`` the file: a migration that drops an index
    frees its pages without changing a row) does before it closes (on its connection's
    thread), all of it optional, each step its own transaction, none waiting for a lock
    (another process writing: it is skipped):

    - a search index of at most ``_TIDY_MAX_BLOCKS`` blocks in several segments, whose
      largest segment is less than nine tenths of it, is merged into one (FTS5's
      automerge leaves up to three segments of each size: on the storage benchmark's
      database they were 30 % of the index: 9.8 B/event against 6.9 merged);
    - the free pages of a database created with ``auto_vacuum = INCREMENTAL`` (every new
      one since issue 15; an older file would need a VACUUM to change it) go back to the
      file system, at most ``_TIDY_FREE_PAGES`` (pages freed by merges and rewritten packs,
      which would otherwise be reused only by later appends).

    A larger index is left to automerge: a merge that ``_tidy`` could not finish would be
    finished by the next appends, a little in each, which slows them (see
    ``_rebuild_search_index``)."""
    if raw.total_changes == 0 and not upgraded:
        return  # nothing written since the store opened
    (timeout,) = raw.execute("PRAGMA busy_timeout").fetchone()
    raw.execute("PRAGMA busy_timeout = 0")
    try:
        if _search_index_worth_merging(raw):
            for _ in range(2 * _TIDY_MAX_BLOCKS // _TIDY_MERGE_BLOCKS):
                before = raw.total_changes
                raw.execute(
                    "INSERT INTO search_index (search_index, rank) VALUES ('merge', ?)",
                    (-_TIDY_MERGE_BLOCKS,),
                )
                if raw.total_changes - before < 2:
                    break  # FTS5 found nothing left to merge
        (vacuum,) = raw.execute("PRAGMA auto_vacuum").fetchone()
        (free,) = raw.execute("PRAGMA freelist_count").fetchone()
        if vacuum == 2 and free:  # INCREMENTAL
            # Each step of the statement frees one page, and the sqlite3 module steps a
            # statement without columns once: one execution a page, in one transaction.
            raw.execute("BEGIN IMMEDIATE")
            try:
                for _ in range(min(free, _TIDY_FREE_PAGES)):
                    raw.execute("PRAGMA incremental_vacuum(1)")
                raw.execute("COMMIT")
            except BaseException:
                raw.execute("ROLLBACK")
                raise
    except sqlite3.Error:
        pass  # busy, full, read-only: the file stays as it was, which is fine
    finally:
        raw.execute(f"PRAGMA busy_timeout = {int(timeout)}")


def _search_index_worth_merging(raw: sqlite3.Connection) -> bool:
    """Whether ``_tidy`` merges the search index: at most ``_TIDY_MAX_BLOCKS`` blocks in
    more than one segment, the largest under nine tenths of them. A block's rowid is
    its segment's id shifted by 37 bits (FTS5's on-disk layout; ids below 2**37 are
    FTS5's own records), which only guides this choice: the merge itself is FTS5's."""
    sizes = [
        n
        for (n,) in raw.execute(
            "SELECT count(*) FROM (SELECT id FROM search_index_data WHERE id >= ? LIMIT ?) "
            "GROUP BY id >> 37",
            (1 << 37, _TIDY_MAX_BLOCKS + 1),
        )
    ]
    total = sum(sizes)
    return len(sizes) > 1 and total <= _TIDY_MAX_BLOCKS and max(sizes) < 0.9 * total


SEARCH_INDEX = True
"""Whether appends write the search index (only the benchmark turns it off, to measure
what the index costs an append)."""


def _index_events(
    raw: sqlite3.Connection,
    key: int,
    events: Sequence[Event],
    folder: SurfaceFolder[None],
    texts: dict[int, str | None],
) -> None:
    """Keep the session's search index in step with its surface after ``events`` (in the
    append's transaction): add their messages (``texts``: each surface event's
    ``indexed_text``, by its index in the batch), drop the messages their replaces
    shadowed (``folder`` holds the surface after the batch whenever it has a replace),
    whose log rows then hold their texts again (``_unlink_messages``)."""
    if not SEARCH_INDEX:
        return
    added: list[tuple[int, int, str]] = []
    gone: list[tuple[int, int]] = []
    for i, event in enumerate(events):
        op = event.surface_op
        if op is None:
            continue
        if op != "append":
            gone.extend((key, seq) for seq in event.source_event_seqs or () if seq not in folder)
        text = texts[i]
        if text is not None:
            added.append((key, event.seq, text))
    if added:
        raw.executemany(_INSERT_SEARCH_SQL, added)
    if gone:
        _unlink_messages(raw, key, [seq for _, seq in gone])
        raw.executemany("DELETE FROM search_messages WHERE session = ? AND seq = ?", gone)


def _unlink_messages(raw: sqlite3.Connection, key: int, seqs: Sequence[int]) -> None:
    """Store the JSON of each of these rows that links to its search row (see
    ``_stored_message``) in the row itself, before that search row goes: the log keeps
    every event whole whatever the search index drops."""
    for start in range(0, len(seqs), _SEQS_PER_QUERY):
        chunk = seqs[start : start + _SEQS_PER_QUERY]
        rows = raw.execute(
            f"SELECT seq, {_DATA} FROM events WHERE session = ? AND kind = {KIND_SURFACE} "
            f"AND {_is_linked('events')} AND seq IN ({', '.join('?' * len(chunk))})",
            (key, *chunk),
        ).fetchall()
        try:
            whole = [(_stored_data(_text(data)), key, seq) for seq, data in rows]
        except (ValueError, TypeError, zlib.error) as err:
            raise _DamagedPack(str(err)) from err  # the append names the file
        raw.executemany("UPDATE events SET data = ? WHERE session = ? AND seq = ?", whole)


_INSERT_SEARCH_SQL = "INSERT INTO search_messages (session, seq, text) VALUES (?, ?, ?)"


def _reindex_session(raw: sqlite3.Connection, store: SqliteSessionStore, key: int) -> None:
    """Write the session's search index from its surface (the upgrade of a database
    written before the index existed)."""
    rows = raw.execute(
        f"SELECT {_EVENT_COLUMNS} FROM events WHERE session = ? AND kind = {KIND_SURFACE} "
        "ORDER BY seq",
        (key,),
    ).fetchall()
    try:
        _unlink_messages(raw, key, [row[0] for row in rows])  # (a pending session has none)
    except _DamagedPack as err:
        raise StoreError(f"{store._path}: a stored event is corrupt ({err})") from err
    raw.execute("DELETE FROM search_messages WHERE session = ?", (key,))
    added = []
    for event in fold_surface(store._decode_events(rows)):
        text = indexed_text(event)
        if text is not None:
            added.append((key, event.seq, text))
    raw.executemany(_INSERT_SEARCH_SQL, added)


_FTS_PHRASE_MAX = 32
"""Characters of a term looked up in the FTS5 index (the rest is checked on the rows)."""


def _fts_query(term: str) -> str:
    """``term`` as an FTS5 query: the AND of the trigrams of its first ``_FTS_PHRASE_MAX``
    characters (each one FTS5 string; the index keeps no positions, so it cannot match
    them as a phrase). It finds every message the term can be in, and some it is not in:
    ``dsh_holds`` checks each on its text. (A pasted 100,000 character term is looked up by
    its prefix: the rows are checked against the whole term.)"""
    head = term[:_FTS_PHRASE_MAX]
    trigrams = dict.fromkeys(head[i : i + 3] for i in range(len(head) - 2))
    return " AND ".join('"' + t.replace('"', '""') + '"' for t in trigrams)


_WIDE_FOLDS = re.compile("[iksIKS]")
"""The ASCII letters that ``re.IGNORECASE`` matches with a non-ASCII one too (İ, ı, the
Kelvin sign, long s); every other ASCII character matches its ASCII cases only (a test
checks every ASCII character against every code point)."""


def _like_superset(term: str) -> str | None:
    """A ``LIKE … ESCAPE '\\'`` pattern (which folds ASCII letters only) that every text
    holding ``term`` as ``core.search.matches`` finds it matches: its first
    ``_FTS_PHRASE_MAX`` characters, with ``_`` (any one character) for each letter
    ``_WIDE_FOLDS`` holds. ``None`` for a term with a non-ASCII character (whose folds
    are many: ``dsh_holds`` alone checks it)."""
    if not term.isascii():
        return None
    return _WIDE_FOLDS.sub("_", like_pattern(term[:_FTS_PHRASE_MAX]))


@functools.lru_cache(maxsize=2 * MAX_TERMS)
def _term_pattern(term: str) -> re.Pattern[str]:
    return re.compile(re.escape(term), re.IGNORECASE)


def _holds(text: str, term: str) -> bool:
    """SQL ``dsh_holds(text, term)``: whether ``text`` contains ``term``, case folded as
    ``core.search.matches`` does (registered on every connection, see ``_setup``)."""
    return _term_pattern(term).search(text) is not None


def _search_sql(long_terms: Sequence[bool], short_terms: int) -> str:
    """The newest messages that may match (see ``search_messages``), newest first: for
    the long terms, FTS5 finds the messages holding their trigrams (``_fts_query``) and
    ``dsh_holds`` keeps those holding each term whole, folded as ``core.search.matches``
    folds it (so the window is the newest ``RANK_WINDOW`` true matches, as on every
    store), after a ``LIKE`` (``_like_superset``) for each term that has one (``True``
    in ``long_terms``) and the short terms' ``LIKE``: the conditions in C come first, so
    most lookalikes, and the messages without a short term, are dropped without a call
    into Python. They are ranked by ``core.search.rank_hits``."""
    holds = " AND dsh_holds(r.text, ?)" * len(long_terms)
    likes = " AND r.text LIKE ? ESCAPE '\\'" * (sum(long_terms) + short_terms)
    # Only the sessions the store's user may read (issue 17), inside the window.
    readable = f" AND {_readable('o')}"
    if long_terms:
        found = (
            "SELECT i.rowid FROM search_index AS i JOIN search_messages AS r "
            "ON r.id = i.rowid JOIN sessions AS o ON o.key = r.session "
            f"WHERE search_index MATCH ?{likes}{holds}{readable} ORDER BY i.rowid DESC LIMIT ?"
        )
    else:
        found = (
            "SELECT r.id FROM search_messages AS r JOIN sessions AS o ON o.key = r.session "
            f"WHERE 1{likes}{readable} ORDER BY r.id DESC LIMIT ?"
        )
    return (
        "SELECT s.id, m.seq, m.text FROM search_messages AS m "
        f"JOIN sessions AS s ON s.key = m.session WHERE m.id IN ({found}) ORDER BY m.id DESC"
    )


class _DamagedPack(Exception):
    """The open pack an append would extend, or a linked message row it must make whole,
    does not decode (the append names the file)."""


class _PackDraft:
    """A pack being written by an append: its events' types and times, its stored lines
    and chunk runs (see ``_pack``); compressed once the batch's replies are linked."""

    __slots__ = ("first", "lines", "linked", "runs", "times", "types")

    def __init__(
        self,
        first: int,
        types: list[str],
        times: list[int],
        lines: list[str] | None = None,
        runs: list[list[int]] | None = None,
    ) -> None:
        self.first = first
        self.types = types
        self.times = times
        self.lines: list[str] = [] if lines is None else lines
        self.runs: list[list[int]] = [] if runs is None else runs
        self.linked = False  # whether ``_link_runs`` pointed a run of it at a reply

    def blob(self) -> bytes:
        return _pack_blob(self.types, self.times, self.lines, self.runs)


def _with_blob(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """An insert row whose data is a ``_PackDraft``, with the draft's blob instead."""
    return (*row[:6], row[6].blob(), *row[7:])


def _open_draft(open_pack: tuple[int, int, bytes], first: int) -> _PackDraft | None:
    """The open pack (the session's last row, ``(seq, n, blob)``) as a draft, when it
    ends right before ``first`` (else ``None``); laid out as ``_pack`` lays it out. One
    that does not decode is ``_DamagedPack``."""
    seq, n, blob = open_pack
    if seq + n != first:
        return None
    try:
        types, times, lines, runs = _pack_parts(blob)
    except (ValueError, TypeError, zlib.error) as err:
        raise _DamagedPack(str(err)) from err
    if not runs:
        # A pack without chunk runs (one written before them, or one without chunks):
        # its lines are its texts, laid out again as ``_pack`` lays them out.
        lines, texts = [], lines
        _add_lines(lines, runs, texts)
    return _PackDraft(seq, types, times, lines, runs)


def _fill_draft(draft: _PackDraft, batch: Sequence[ValidatedEvent], end: int) -> int:
    """Move as many of ``batch[:end]`` into the open pack as it has room for; the index
    of the first event left over."""
    n = len(draft.types)
    if n >= _PACK_MAX_EVENTS:
        return 0
    size = _text_size(draft.lines, draft.runs)
    take = 0
    while take < end and n + take < _PACK_MAX_EVENTS:
        size += len(batch[take].data_json) + 1
        if size > _PACK_MAX_BYTES:
            break
        take += 1
    if take == 0:
        return 0
    added = batch[:take]
    _add_lines(draft.lines, draft.runs, [e.data_json for e in added])
    draft.types += [e.type for e in added]
    draft.times += [e.time for e in added]
    return take


def _reply_packs(
    raw: sqlite3.Connection,
    key: int,
    rows: Sequence[tuple[Any, ...]],
    opened: _PackDraft | None,
    stored: dict[int, _PackDraft | None],
    seq: int,
    data: Any,
) -> list[_PackDraft]:
    """The packs a reply at ``seq`` may link (``_link_runs``), in order: the packs right
    before it, walking back over the rows (this batch's ``rows``, then the open pack,
    then the packs stored before it, read once into ``stored`` by the seq they end
    before) while each holds a chunk run of the reply's turn and step. The same packs
    whether the reply was appended in one batch or streamed in many (paced and batch
    appends write the same packs), and a reply of many packs is linked whole."""
    turn, step = data.get("turn"), data.get("step")

    def of_reply(draft: _PackDraft) -> bool:
        return any(run[2] == turn and run[3] == step for run in draft.runs)

    chain: list[_PackDraft] = []
    for row in reversed(rows):
        if row[1] >= seq:
            continue
        draft = row[6]
        if draft.__class__ is not _PackDraft or not of_reply(draft):
            chain.reverse()
            return chain
        chain.append(draft)
    if opened is not None and of_reply(opened):
        chain.append(opened)
        before = opened.first
        while True:
            if before not in stored:
                stored[before] = _stored_pack_before(raw, key, before)
            found = stored[before]
            if found is None or not of_reply(found):
                break
            chain.append(found)
            before = found.first
    chain.reverse()
    return chain


def _stored_pack_before(raw: sqlite3.Connection, key: int, before: int) -> _PackDraft | None:
    """The session's row ending right before seq ``before`` as a draft, when it is a pack
    that decodes (a damaged one is left as it is: its readers name the damage)."""
    row = raw.execute(
        "SELECT seq, n, kind, data FROM events WHERE session = ? AND seq < ? "
        "ORDER BY seq DESC LIMIT 1",
        (key, before),
    ).fetchone()
    if row is None or row[2] != KIND_PACK:
        return None
    try:
        return _open_draft((row[0], row[1], row[3]), before)
    except _DamagedPack:
        return None


def _link_runs(drafts: Sequence[_PackDraft], replies: Sequence[tuple[int, Any]]) -> None:
    """Point the chunk runs of ``drafts`` at the reply that holds their text (issue 15):
    for each ``assistant/message`` of the batch (``(seq, data)``), each text run of the
    same turn and step before it whose texts joined are, exactly, a part of one of the
    message's text blocks becomes ``[start, count, turn, step, index, seq, block, offset,
    chars]`` with each line the length of its text in code points (see ``_pack``). A run
    that matches nothing stays as it is; a draft that changed says so (``linked``)."""
    for seq, data in replies:
        turn, step = data.get("turn"), data.get("step")
        message = data.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if turn.__class__ is not int or step.__class__ is not int or not isinstance(content, list):
            continue
        blocks = [
            (b, block["text"])
            for b, block in enumerate(content)
            if isinstance(block, dict)
            and block.get("type") == "text"
            and block.get("text").__class__ is str
        ]
        if not blocks:
            continue
        after: dict[int, int] = {}  # where the last run found in each block ended
        for draft in drafts:
            for r, run in enumerate(draft.runs):
                start, count, run_turn, run_step = run[0], run[1], run[2], run[3]
                if (
                    len(run) != 5
                    or run_turn != turn
                    or run_step != step
                    or draft.first + start + count > seq
                ):
                    continue
                chars = draft.lines[start : start + count]
                stored = '["' + '","'.join(chars) + '"]'
                try:
                    texts = loads_exact(stored)
                except ValueError:
                    continue
                # Only when the read rebuilds these very lines from the texts (it escapes
                # each with ``dumps_js``, as the append wrote it).
                if dumps_js(texts) != stored:
                    continue
                whole = "".join(texts)
                if not whole:
                    continue
                for b, text in blocks:
                    at = text.find(whole, after.get(b, 0))
                    if at < 0:
                        at = text.find(whole)
                    if at >= 0:
                        break
                else:
                    continue
                after[b] = at + len(whole)
                draft.runs[r] = [*run, seq, b, at, sum(map(len, chars))]
                draft.lines[start : start + count] = [str(len(t)) for t in texts]
                draft.linked = True


def _text_size(lines: list[str], runs: list[list[int]]) -> int:
    """The length of a pack's data JSON texts joined by newlines (what bounds a pack),
    from its stored lines and chunk runs without rebuilding them."""
    size = sum(map(len, lines)) + len(lines) - 1
    for run in runs:
        start, count, turn, step, index = run[:5]
        skeleton = len(_chunk_line(turn, step, 0, "")) - 1  # without the index's digit
        size += count * skeleton + sum(len(str(index + k)) for k in range(count))
        if len(run) == 9:  # its lines hold lengths, its texts' escaped size is its last
            size += run[8] - sum(map(len, lines[start : start + count]))
    return size


def _outline_rows(raw: sqlite3.Connection, key: int, rows: Iterable[Any]) -> list[SurfaceOutline]:
    """Decode ``(seq, surface_op, source_event_seqs, projection)`` rows of ``events``; a
    projection written as NULL (rows from before schema v3 kept it) is computed from the
    event's data. Corrupt data raises ``ValueError``, ``TypeError`` or ``zlib.error``."""
    out: list[SurfaceOutline] = []
    for seq, surface_op, source_seqs, projection in rows:
        op = decode_op(surface_op)
        seqs = None if source_seqs is None else decode_seqs(source_seqs)
        if projection is None:  # written before projections were kept
            raw_type, time, data = raw.execute(
                # (a row without a projection is older than linked rows: its data is
                # plain, and this runs in the v4 upgrade, before search_messages exists)
                "SELECT type, time, data FROM events WHERE session = ? AND seq = ?",
                (key, seq),
            ).fetchone()
            event = build_event(
                seq, decode_text(raw_type), time, loads_exact(_text(data)), op, seqs
            )
            projection = projection_code(event)
        out.append(SurfaceOutline(seq, op, seqs, projection))
    return out


_INSERT_NODE_SQL = "INSERT INTO surface_nodes (session, pos, seq, projection) VALUES (?, ?, ?, ?)"


def _track_surface(
    raw: sqlite3.Connection,
    key: int,
    first: int,
    batch: Sequence[ValidatedEvent],
    codes: dict[int, int],
) -> None:
    """Keep ``surface_nodes`` and ``surface_sums`` in step with a batch whose surface
    operations were checked (so every replace's range is on the surface); ``codes``: the
    projection code of each surface event, by its index in the batch (in order)."""
    pending: list[tuple[int, int, int, int]] = []
    sums = MessageSums()
    for offset, code in codes.items():
        op = batch[offset].surface_op
        seq = first + offset
        if isinstance(op, Replace):
            if pending:
                raw.executemany(_INSERT_NODE_SQL, pending)
                pending.clear()
            ends = raw.execute(
                "SELECT pos FROM surface_nodes WHERE session = ? AND seq IN (?, ?) ORDER BY pos",
                (key, op.start, op.end),
            ).fetchall()
            if not ends:
                raise StoreError(f"the surface index lacks seqs {op.start}..{op.end}")
            lo, hi = ends[0][0], ends[-1][0]
            for (gone,) in raw.execute(
                "SELECT projection FROM surface_nodes WHERE session = ? AND pos BETWEEN ? AND ?",
                (key, lo, hi),
            ).fetchall():
                sums.remove(gone)
            raw.execute(
                "DELETE FROM surface_nodes WHERE session = ? AND pos BETWEEN ? AND ?",
                (key, lo, hi),
            )
            pending.append((key, lo, seq, code))
        else:
            pending.append((key, seq, seq, code))
        sums.add(code)
    if pending:
        raw.executemany(_INSERT_NODE_SQL, pending)
    if sums.messages or sums.bytes:
        raw.execute(
            "INSERT INTO surface_sums (session, messages, bytes) VALUES (?, ?, ?) "
            "ON CONFLICT (session) DO UPDATE SET messages = messages + excluded.messages, "
            "bytes = bytes + excluded.bytes",
            (key, sums.messages, sums.bytes),
        )


_BACKFILL_REPORT_MIN = 100_000
"""An upgrade folding at least this many surface rows reports its progress."""
_BACKFILL_BATCH = 50_000


def _backfill_surfaces(
    raw: sqlite3.Connection,
    progress: Callable[[int, int], None] | None,
    only: Sequence[int] | None = None,
) -> None:
    """Migration to schema v4: fold every session's surface once into ``surface_nodes``
    and ``surface_sums`` (positions: the node's rank, below every later seq). ``only``:
    these sessions alone (their nodes and sums gone first; schema v10)."""
    (total,) = raw.execute(f"SELECT count(*) FROM events WHERE kind = {KIND_SURFACE}").fetchone()
    report = progress if progress is not None and total >= _BACKFILL_REPORT_MIN else None
    if only is not None:
        report = None
    done = 0
    keys = [key for (key,) in raw.execute("SELECT key FROM sessions ORDER BY key").fetchall()]
    if only is not None:
        keys = list(only)
    for key in keys:
        cursor = raw.execute(
            "SELECT seq, surface_op, source_event_seqs, projection FROM events "
            f"WHERE session = ? AND kind = {KIND_SURFACE} ORDER BY seq",
            (key,),
        )
        outline: list[SurfaceOutline] = []
        while rows := cursor.fetchmany(_BACKFILL_BATCH):
            try:
                outline += _outline_rows(raw, key, rows)
            except (ValueError, TypeError, zlib.error) as err:
                raise StoreError(f"cannot upgrade: a stored event is corrupt ({err})") from err
            done += len(rows)
            if report is not None:
                report(done, total)
        try:
            nodes = fold_surface(outline)
        except InvalidEventError as err:
            raise StoreError(f"cannot upgrade: a stored surface is invalid ({err})") from err
        raw.executemany(
            _INSERT_NODE_SQL, [(key, pos, n.seq, n.projection) for pos, n in enumerate(nodes)]
        )
        sums = MessageSums(n.projection for n in nodes)
        if sums.messages:
            raw.execute(
                "INSERT INTO surface_sums (session, messages, bytes) VALUES (?, ?, ?)",
                (key, sums.messages, sums.bytes),
            )
    if report is not None and done < total:
        report(total, total)


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
