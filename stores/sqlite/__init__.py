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
its trigrams and each candidate checked on its text inside the same query. Since schema
v13 (issue 36) the store adds a batch's rows to the index in one ``INSERT … SELECT``
(``_index_rows``) instead of a trigger's statement per row; a row deleted still leaves
it by its trigger. Terms of one or two characters (schema v14, ``shortgrams``) are looked
up in ``short_grams``, an FTS5 index of the distinct folded characters and pairs of each
block of 64 search rows, and only the blocks that hold them are checked, not every row.

Durability: WAL with ``synchronous = NORMAL``: a commit survives a crash of dsh, but a
power loss may drop the last commits (never corrupt the file).

Every operation is one transaction on one connection, serialised by an ``asyncio.Lock``;
writes use ``BEGIN IMMEDIATE`` so concurrent writers (other processes) queue on the busy
timeout instead of failing half-way, and a residual ``SQLITE_BUSY`` is retried.

One module per concern (this package re-exports their names as ``stores.sqlite``'s):
``store`` (the class, composed of the mixins below, and opening it), ``connection``
(errors, busy retries, transactions), ``schema`` (migrations, setting up a connection),
``sql`` (the SQL fragments they share), ``encoding`` (single rows: the dictionary, linked
messages), ``packs`` (the pack layout, reading packs), ``drafts`` (packs an append writes,
linked runs), ``writes`` (sessions and appends), ``surfaces`` (surface nodes and sums, the
surface reads), ``reads`` (events by session and by seq), ``listing`` (headers, titles,
latest marks), ``search`` (the index and searching), ``shortgrams`` (the index of terms of
one or two characters), ``sharing`` (owners, readers, shares), ``leases`` (reply leases),
``tidy`` (at close), ``pairs`` (the schema v10 upgrade).


The names below load their module when first asked for: a module of the package imported
on its own (``stores.sqlite.oneshot``, the one-shot read of ``dsh search``) loads only what
it imports, never aiosqlite or asyncio.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.lazy import lazy_names

if TYPE_CHECKING:
    from stores.sqlite.connection import _BUSY_TIMEOUT_S as _BUSY_TIMEOUT_S
    from stores.sqlite.connection import _NEARLY_FULL_BYTES as _NEARLY_FULL_BYTES
    from stores.sqlite.connection import _RETRY_WINDOW_S as _RETRY_WINDOW_S
    from stores.sqlite.connection import _connect_target as _connect_target
    from stores.sqlite.connection import _consume as _consume
    from stores.sqlite.connection import _file_is_read_only as _file_is_read_only
    from stores.sqlite.connection import _free_bytes as _free_bytes
    from stores.sqlite.connection import _is_busy as _is_busy
    from stores.sqlite.connection import _is_disk_full as _is_disk_full
    from stores.sqlite.connection import _is_read_only_error as _is_read_only_error
    from stores.sqlite.connection import _scalar as _scalar
    from stores.sqlite.connection import _size as _size
    from stores.sqlite.connection import _store_error as _store_error
    from stores.sqlite.connection import _worker_stopped as _worker_stopped
    from stores.sqlite.drafts import _fill_draft as _fill_draft
    from stores.sqlite.drafts import _link_runs as _link_runs
    from stores.sqlite.drafts import _open_draft as _open_draft
    from stores.sqlite.drafts import _PackDraft as _PackDraft
    from stores.sqlite.drafts import _reply_packs as _reply_packs
    from stores.sqlite.drafts import _stored_pack_before as _stored_pack_before
    from stores.sqlite.drafts import _text_size as _text_size
    from stores.sqlite.drafts import _with_blob as _with_blob
    from stores.sqlite.encoding import _COMPRESS_MIN as _COMPRESS_MIN
    from stores.sqlite.encoding import _DICTIONARY as _DICTIONARY
    from stores.sqlite.encoding import _DICTIONARY_ID as _DICTIONARY_ID
    from stores.sqlite.encoding import _LINK_MIN as _LINK_MIN
    from stores.sqlite.encoding import _ZLIB_LEVEL as _ZLIB_LEVEL
    from stores.sqlite.encoding import _inflate as _inflate
    from stores.sqlite.encoding import _linked_text as _linked_text
    from stores.sqlite.encoding import _stored_data as _stored_data
    from stores.sqlite.encoding import _stored_message as _stored_message
    from stores.sqlite.encoding import _text as _text
    from stores.sqlite.encoding import _title_text as _title_text
    from stores.sqlite.listing import _IN_CHUNK as _IN_CHUNK
    from stores.sqlite.listing import _MEMO_LIMIT as _MEMO_LIMIT
    from stores.sqlite.listing import LAST_EVENT_TIMES_SQL as LAST_EVENT_TIMES_SQL
    from stores.sqlite.listing import _trim as _trim
    from stores.sqlite.listing import latest_events_sql as latest_events_sql
    from stores.sqlite.listing import titles_sql as titles_sql
    from stores.sqlite.packs import _ASSISTANT_MESSAGE_TYPE as _ASSISTANT_MESSAGE_TYPE
    from stores.sqlite.packs import _C_UNLINK_RUNS as _C_UNLINK_RUNS
    from stores.sqlite.packs import _C_UNPACK_EVENTS as _C_UNPACK_EVENTS
    from stores.sqlite.packs import _CHUNK_LINE as _CHUNK_LINE
    from stores.sqlite.packs import _DIGITS as _DIGITS
    from stores.sqlite.packs import _PACK_EVENT_MAX as _PACK_EVENT_MAX
    from stores.sqlite.packs import _PACK_MAX_BYTES as _PACK_MAX_BYTES
    from stores.sqlite.packs import _PACK_MAX_EVENTS as _PACK_MAX_EVENTS
    from stores.sqlite.packs import _add_lines as _add_lines
    from stores.sqlite.packs import _body_parts as _body_parts
    from stores.sqlite.packs import _chunk_line as _chunk_line
    from stores.sqlite.packs import _DamagedPack as _DamagedPack
    from stores.sqlite.packs import _escaped_pieces as _escaped_pieces
    from stores.sqlite.packs import _header_fields as _header_fields
    from stores.sqlite.packs import _pack as _pack
    from stores.sqlite.packs import _pack_blob as _pack_blob
    from stores.sqlite.packs import _pack_header as _pack_header
    from stores.sqlite.packs import _pack_parts as _pack_parts
    from stores.sqlite.packs import _pack_types as _pack_types
    from stores.sqlite.packs import _plain_types as _plain_types
    from stores.sqlite.packs import _py_unpack_body as _py_unpack_body
    from stores.sqlite.packs import _py_unpack_events as _py_unpack_events
    from stores.sqlite.packs import _rebuild_lines as _rebuild_lines
    from stores.sqlite.packs import _ReplyTexts as _ReplyTexts
    from stores.sqlite.packs import _unlink_runs as _unlink_runs
    from stores.sqlite.packs import _unlinked as _unlinked
    from stores.sqlite.packs import _unpack_events as _unpack_events
    from stores.sqlite.pairs import merge_stored_pairs as merge_stored_pairs
    from stores.sqlite.reads import _INT64_MAX as _INT64_MAX
    from stores.sqlite.reads import _SPAN_SLACK as _SPAN_SLACK
    from stores.sqlite.reads import _SPAN_SQL as _SPAN_SQL
    from stores.sqlite.reads import _bodies_at as _bodies_at
    from stores.sqlite.reads import _rows_at as _rows_at
    from stores.sqlite.schema import _BACKFILL as _BACKFILL
    from stores.sqlite.schema import _MARKS_OF_STEP as _MARKS_OF_STEP
    from stores.sqlite.schema import _MERGE_PAIRS as _MERGE_PAIRS
    from stores.sqlite.schema import _PAGE_SIZE as _PAGE_SIZE
    from stores.sqlite.schema import _REBUILD_SEARCH as _REBUILD_SEARCH
    from stores.sqlite.schema import _SPLIT_MARKS as _SPLIT_MARKS
    from stores.sqlite.schema import _SPLIT_SOURCES as _SPLIT_SOURCES
    from stores.sqlite.schema import MIGRATIONS as MIGRATIONS
    from stores.sqlite.schema import SCHEMA_VERSION as SCHEMA_VERSION
    from stores.sqlite.schema import _split_packed_marks as _split_packed_marks
    from stores.sqlite.search import _FTS_PHRASE_MAX as _FTS_PHRASE_MAX
    from stores.sqlite.search import _INSERT_SEARCH_SQL as _INSERT_SEARCH_SQL
    from stores.sqlite.search import _PENDING_PER_TRANSACTION as _PENDING_PER_TRANSACTION
    from stores.sqlite.search import _WIDE_FOLDS as _WIDE_FOLDS
    from stores.sqlite.search import SEARCH_INDEX as SEARCH_INDEX
    from stores.sqlite.search import _fts_query as _fts_query
    from stores.sqlite.search import _holds as _holds
    from stores.sqlite.search import _index_events as _index_events
    from stores.sqlite.search import _like_superset as _like_superset
    from stores.sqlite.search import _reindex_session as _reindex_session
    from stores.sqlite.search import _search_sql as _search_sql
    from stores.sqlite.search import _term_pattern as _term_pattern
    from stores.sqlite.search import _unlink_messages as _unlink_messages
    from stores.sqlite.sharing import _readable as _readable
    from stores.sqlite.sql import _DATA as _DATA
    from stores.sqlite.sql import _EVENT_COLUMNS as _EVENT_COLUMNS
    from stores.sqlite.sql import _IS_MARK as _IS_MARK
    from stores.sqlite.sql import _IS_MARK_V11 as _IS_MARK_V11
    from stores.sqlite.sql import _IS_REPLACE as _IS_REPLACE
    from stores.sqlite.sql import _LINKED as _LINKED
    from stores.sqlite.sql import _SEQS_PER_QUERY as _SEQS_PER_QUERY
    from stores.sqlite.sql import KIND_PACK as KIND_PACK
    from stores.sqlite.sql import _blob as _blob
    from stores.sqlite.sql import _data_sql as _data_sql
    from stores.sqlite.sql import _is_linked as _is_linked
    from stores.sqlite.sql import _is_mark as _is_mark
    from stores.sqlite.store import SqliteSessionStore as SqliteSessionStore
    from stores.sqlite.surfaces import _BACKFILL_BATCH as _BACKFILL_BATCH
    from stores.sqlite.surfaces import _BACKFILL_REPORT_MIN as _BACKFILL_REPORT_MIN
    from stores.sqlite.surfaces import _INSERT_NODE_SQL as _INSERT_NODE_SQL
    from stores.sqlite.surfaces import _NEWEST_REPLACES_SQL as _NEWEST_REPLACES_SQL
    from stores.sqlite.surfaces import _NODE_SEQS_SQL as _NODE_SEQS_SQL
    from stores.sqlite.surfaces import _backfill_surfaces as _backfill_surfaces
    from stores.sqlite.surfaces import _last_seq as _last_seq
    from stores.sqlite.surfaces import _outline_rows as _outline_rows
    from stores.sqlite.surfaces import _track_surface as _track_surface
    from stores.sqlite.tidy import _TIDY_FREE_PAGES as _TIDY_FREE_PAGES
    from stores.sqlite.tidy import _TIDY_MAX_BLOCKS as _TIDY_MAX_BLOCKS
    from stores.sqlite.tidy import _TIDY_MERGE_BLOCKS as _TIDY_MERGE_BLOCKS
    from stores.sqlite.tidy import _search_index_worth_merging as _search_index_worth_merging
    from stores.sqlite.tidy import _tidy as _tidy
    from stores.sqlite.writes import _APPEND_HEAD_SQL as _APPEND_HEAD_SQL
    from stores.sqlite.writes import _INSERT_EVENT_SQL as _INSERT_EVENT_SQL
    from stores.sqlite.writes import _INSERT_SESSION_SQL as _INSERT_SESSION_SQL
    from stores.sqlite.writes import _insert_events as _insert_events
    from stores.sqlite.writes import _insert_session as _insert_session
    from stores.sqlite.writes import _insert_session_sync as _insert_session_sync
    from stores.sqlite.writes import _session_params as _session_params
    from stores.validation import KIND_SURFACE as KIND_SURFACE  # (read by tests as this module's)

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SqliteSessionStore"]

_HOMES = {
    "_BUSY_TIMEOUT_S": "stores.sqlite.connection",
    "_NEARLY_FULL_BYTES": "stores.sqlite.connection",
    "_RETRY_WINDOW_S": "stores.sqlite.connection",
    "_connect_target": "stores.sqlite.connection",
    "_consume": "stores.sqlite.connection",
    "_file_is_read_only": "stores.sqlite.connection",
    "_free_bytes": "stores.sqlite.connection",
    "_is_busy": "stores.sqlite.connection",
    "_is_disk_full": "stores.sqlite.connection",
    "_is_read_only_error": "stores.sqlite.connection",
    "_scalar": "stores.sqlite.connection",
    "_size": "stores.sqlite.connection",
    "_store_error": "stores.sqlite.connection",
    "_worker_stopped": "stores.sqlite.connection",
    "_fill_draft": "stores.sqlite.drafts",
    "_link_runs": "stores.sqlite.drafts",
    "_open_draft": "stores.sqlite.drafts",
    "_PackDraft": "stores.sqlite.drafts",
    "_reply_packs": "stores.sqlite.drafts",
    "_stored_pack_before": "stores.sqlite.drafts",
    "_text_size": "stores.sqlite.drafts",
    "_with_blob": "stores.sqlite.drafts",
    "_COMPRESS_MIN": "stores.sqlite.encoding",
    "_DICTIONARY": "stores.sqlite.encoding",
    "_DICTIONARY_ID": "stores.sqlite.encoding",
    "_LINK_MIN": "stores.sqlite.encoding",
    "_ZLIB_LEVEL": "stores.sqlite.encoding",
    "_inflate": "stores.sqlite.encoding",
    "_linked_text": "stores.sqlite.encoding",
    "_stored_data": "stores.sqlite.encoding",
    "_stored_message": "stores.sqlite.encoding",
    "_text": "stores.sqlite.encoding",
    "_title_text": "stores.sqlite.encoding",
    "_IN_CHUNK": "stores.sqlite.listing",
    "_MEMO_LIMIT": "stores.sqlite.listing",
    "LAST_EVENT_TIMES_SQL": "stores.sqlite.listing",
    "_trim": "stores.sqlite.listing",
    "latest_events_sql": "stores.sqlite.listing",
    "titles_sql": "stores.sqlite.listing",
    "_ASSISTANT_MESSAGE_TYPE": "stores.sqlite.packs",
    "_C_UNLINK_RUNS": "stores.sqlite.packs",
    "_C_UNPACK_EVENTS": "stores.sqlite.packs",
    "_CHUNK_LINE": "stores.sqlite.packs",
    "_DIGITS": "stores.sqlite.packs",
    "_PACK_EVENT_MAX": "stores.sqlite.packs",
    "_PACK_MAX_BYTES": "stores.sqlite.packs",
    "_PACK_MAX_EVENTS": "stores.sqlite.packs",
    "_add_lines": "stores.sqlite.packs",
    "_body_parts": "stores.sqlite.packs",
    "_chunk_line": "stores.sqlite.packs",
    "_DamagedPack": "stores.sqlite.packs",
    "_escaped_pieces": "stores.sqlite.packs",
    "_header_fields": "stores.sqlite.packs",
    "_pack": "stores.sqlite.packs",
    "_pack_blob": "stores.sqlite.packs",
    "_pack_header": "stores.sqlite.packs",
    "_pack_parts": "stores.sqlite.packs",
    "_pack_types": "stores.sqlite.packs",
    "_plain_types": "stores.sqlite.packs",
    "_py_unpack_body": "stores.sqlite.packs",
    "_py_unpack_events": "stores.sqlite.packs",
    "_rebuild_lines": "stores.sqlite.packs",
    "_ReplyTexts": "stores.sqlite.packs",
    "_unlink_runs": "stores.sqlite.packs",
    "_unlinked": "stores.sqlite.packs",
    "_unpack_events": "stores.sqlite.packs",
    "merge_stored_pairs": "stores.sqlite.pairs",
    "_INT64_MAX": "stores.sqlite.reads",
    "_SPAN_SLACK": "stores.sqlite.reads",
    "_SPAN_SQL": "stores.sqlite.reads",
    "_bodies_at": "stores.sqlite.reads",
    "_rows_at": "stores.sqlite.reads",
    "_BACKFILL": "stores.sqlite.schema",
    "_MARKS_OF_STEP": "stores.sqlite.schema",
    "_MERGE_PAIRS": "stores.sqlite.schema",
    "_PAGE_SIZE": "stores.sqlite.schema",
    "_REBUILD_SEARCH": "stores.sqlite.schema",
    "_SPLIT_MARKS": "stores.sqlite.schema",
    "_SPLIT_SOURCES": "stores.sqlite.schema",
    "MIGRATIONS": "stores.sqlite.schema",
    "SCHEMA_VERSION": "stores.sqlite.schema",
    "_split_packed_marks": "stores.sqlite.schema",
    "_FTS_PHRASE_MAX": "stores.sqlite.search",
    "_INSERT_SEARCH_SQL": "stores.sqlite.search",
    "_PENDING_PER_TRANSACTION": "stores.sqlite.search",
    "_WIDE_FOLDS": "stores.sqlite.search",
    "SEARCH_INDEX": "stores.sqlite.search",
    "_fts_query": "stores.sqlite.search",
    "_holds": "stores.sqlite.search",
    "_index_events": "stores.sqlite.search",
    "_like_superset": "stores.sqlite.search",
    "_reindex_session": "stores.sqlite.search",
    "_search_sql": "stores.sqlite.search",
    "_term_pattern": "stores.sqlite.search",
    "_unlink_messages": "stores.sqlite.search",
    "_readable": "stores.sqlite.sharing",
    "_DATA": "stores.sqlite.sql",
    "_EVENT_COLUMNS": "stores.sqlite.sql",
    "_IS_MARK": "stores.sqlite.sql",
    "_IS_MARK_V11": "stores.sqlite.sql",
    "_IS_REPLACE": "stores.sqlite.sql",
    "_LINKED": "stores.sqlite.sql",
    "_SEQS_PER_QUERY": "stores.sqlite.sql",
    "KIND_PACK": "stores.sqlite.sql",
    "_blob": "stores.sqlite.sql",
    "_data_sql": "stores.sqlite.sql",
    "_is_linked": "stores.sqlite.sql",
    "_is_mark": "stores.sqlite.sql",
    "SqliteSessionStore": "stores.sqlite.store",
    "_BACKFILL_BATCH": "stores.sqlite.surfaces",
    "_BACKFILL_REPORT_MIN": "stores.sqlite.surfaces",
    "_INSERT_NODE_SQL": "stores.sqlite.surfaces",
    "_NEWEST_REPLACES_SQL": "stores.sqlite.surfaces",
    "_NODE_SEQS_SQL": "stores.sqlite.surfaces",
    "_backfill_surfaces": "stores.sqlite.surfaces",
    "_last_seq": "stores.sqlite.surfaces",
    "_outline_rows": "stores.sqlite.surfaces",
    "_track_surface": "stores.sqlite.surfaces",
    "_TIDY_FREE_PAGES": "stores.sqlite.tidy",
    "_TIDY_MAX_BLOCKS": "stores.sqlite.tidy",
    "_TIDY_MERGE_BLOCKS": "stores.sqlite.tidy",
    "_search_index_worth_merging": "stores.sqlite.tidy",
    "_tidy": "stores.sqlite.tidy",
    "_APPEND_HEAD_SQL": "stores.sqlite.writes",
    "_INSERT_EVENT_SQL": "stores.sqlite.writes",
    "_INSERT_SESSION_SQL": "stores.sqlite.writes",
    "_insert_events": "stores.sqlite.writes",
    "_insert_session": "stores.sqlite.writes",
    "_insert_session_sync": "stores.sqlite.writes",
    "_session_params": "stores.sqlite.writes",
    "KIND_SURFACE": "stores.validation",
}
"""The module each name lives in (the package's names load it when first asked for)."""


__getattr__ = lazy_names(__name__, _HOMES)
