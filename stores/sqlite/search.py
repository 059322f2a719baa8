"""The SQLite store's search index: keeping it in step with each append, indexing a
session anew, and searching (FTS5 trigram lookups planned by ``_search_sql``, each hit
checked by ``dsh_holds``).
"""

from __future__ import annotations

import asyncio
import functools
import re
import sqlite3
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from core.errors import StoreError
from core.log import Event
from core.search import (
    MAX_TERMS,
    MIN_INDEXED_TERM,
    RANK_WINDOW,
    SearchHit,
    indexed_text,
    like_pattern,
)
from core.surface import SurfaceFolder, fold_surface
from stores.columns import decode_text
from stores.search import plan_search
from stores.sqlite.encoding import _stored_data, _text
from stores.sqlite.packs import _DamagedPack
from stores.sqlite.reads import _Decoding
from stores.sqlite.sharing import _readable
from stores.sqlite.shortgrams import _index_short_grams, short_search_rows
from stores.sqlite.sql import _DATA, _EVENT_COLUMNS, _SEQS_PER_QUERY, _is_linked
from stores.surfaces import shadowed_seqs
from stores.validation import KIND_SURFACE

_PENDING_PER_TRANSACTION = 20
"""Sessions indexed per transaction when a database is upgraded to the search index."""


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
    for i, event in enumerate(events):
        if event.surface_op is None:
            continue
        text = texts[i]
        if text is not None:
            added.append((key, event.seq, text))
    gone = [(key, seq) for seq in shadowed_seqs(events, folder)]
    if added:
        raw.executemany(_INSERT_SEARCH_SQL, added)
        _index_short_grams(raw)  # the blocks these rows completed
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


def _reindex_session(raw: sqlite3.Connection, store: _Decoding, key: int) -> None:
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
    _index_short_grams(raw)


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


class _SearchMixin(_Decoding):
    """Searching messages, and indexing the sessions an upgrade left pending."""

    async def search_messages(self, query: str, *, limit: int = 20) -> list[SearchHit]:
        plan = plan_search(query, limit)
        if plan is None:
            return []
        terms, wanted = plan.terms, plan.limit
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
            rows: Iterable[tuple[bytes, int, str]]
            if long_terms:
                rows = raw.execute(sql, params)
            else:  # the blocks that hold them (stores.sqlite.shortgrams), not a scan
                rows = short_search_rows(raw, short_terms, self._readers, wanted + 16)
            return [(decode_text(sid), seq, text) for sid, seq, text in rows]

        found = await self._run_sync(body, write=False)
        # Ranking (BM25 counts and highlight spans over whole texts) takes seconds for a
        # common word over large messages: off the connection, so other calls proceed.
        return await asyncio.to_thread(plan.rank, found)

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
