"""SQL fragments every concern of the SQLite store shares: how a row of ``events`` is
selected (``_data_sql``, ``_EVENT_COLUMNS``), the kinds of row, and the WHEREs of the
partial indexes that the migrations wrote and the queries must imply.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.log import SESSION_FORK, SESSION_PROFILE, SESSION_SOURCE
from stores.columns import encode_text

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


KIND_PACK = 3
"""``kind`` of a row holding a packed run of ``n`` log events (see :func:`_pack`)."""
