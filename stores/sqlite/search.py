"""The SQLite store's search index: keeping it in step with each append, indexing a
session anew, and searching (FTS5 trigram lookups planned by ``_search_sql``, each hit
checked by ``dsh_holds``).
"""

from __future__ import annotations

import functools
import re
import sqlite3
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from core.errors import StoreError
from core.folding import same_letters
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
from stores.search import SearchPlan, plan_search
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
    whose log rows then hold their texts again (``_unlink_messages``). The FTS5 index
    gets the batch's rows in one statement (``_index_rows``). (Run in an upgrade before
    schema v13, whose trigger indexed each row, a batch holds no message: see
    ``_split_packed_marks``.)"""
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
        _index_rows(raw, key, added[0][1])  # before any delete: a row may go in this batch
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
_INDEX_ROWS_SQL = (
    "INSERT INTO search_index (rowid, text) "
    "SELECT id, text FROM search_messages WHERE session = ? AND seq >= ?"
)


def _index_rows(raw: sqlite3.Connection, key: int, first: int) -> None:
    """Add the session's search rows from seq ``first`` on (those its transaction just
    inserted: a session's earlier messages have lower seqs) to the FTS5 index, in one
    statement (schema v13): FTS5 pays its statement overheads (a savepoint of the
    virtual table, its pending terms looked up) once per batch instead of once per row,
    as the trigger of v6 did (``dsh import`` of 200,000 messages: 1.66x the messages a
    second, ``tests/benchmarks/bench_import_index.py``). Its delete trigger stays: a row
    deleted gives FTS5 its old text."""
    raw.execute(_INDEX_ROWS_SQL, (key, first))


def _indexed_by_trigger(raw: sqlite3.Connection) -> bool:
    """Whether the database's trigger indexes each search row inserted (an upgrade
    running a step before schema v13)."""
    sql = "SELECT 1 FROM sqlite_schema WHERE type = 'trigger' AND name = 'search_messages_insert'"
    return raw.execute(sql).fetchone() is not None


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
    if not _indexed_by_trigger(raw):
        _index_rows(raw, key, 0)
    _index_short_grams(raw)


_FTS_PHRASE_MAX = 32
"""Characters of a term looked up in the FTS5 index (the rest is checked on the rows)."""


def _fts_query(term: str) -> str:
    """``term`` as an FTS5 query: the AND of trigrams of its first ``_FTS_PHRASE_MAX``
    characters (each one FTS5 string; the index keeps no positions, so it cannot match
    them as a phrase). It finds every message the term can be in, and some it is not in:
    each is checked on its text (``_term_check``). Not every trigram: one every three
    characters and the last, which cover the term (each trigram more is a doclist more to
    merge per candidate: two to three times the lookup, and the text check drops what the
    others would have). (A pasted 100,000 character term is looked up by its prefix: the
    rows are checked against the whole term.)

    A trigram holding a character that ``re.IGNORECASE`` matches with characters FTS5
    does not fold to it (``i`` and ``İ``, ``ı``; ``k`` and the Kelvin sign; ``s`` and
    long s; Greek and Cyrillic letters with their variant forms) is looked up as the OR
    of its spellings (``_spellings``), and only where the term has no trigram of one
    spelling (each start then takes the nearest of those instead); one with more than
    ``_MAX_SPELLINGS`` is left out, unless the term has no other."""
    head = term[:_FTS_PHRASE_MAX]
    spelled = [_spellings(head[i : i + 3]) for i in range(len(head) - 2)]
    plain = [i for i, s in enumerate(spelled) if len(s) == 1]
    starts = [*range(0, len(head) - 2, 3), len(head) - 3]
    if plain:  # each start's nearest trigram of one spelling (an OR costs its lookups)
        starts = [_nearest(plain, start) for start in starts]
    chosen = [spelled[i] for i in dict.fromkeys(starts)]
    kept = [s for s in chosen if len(s) <= _MAX_SPELLINGS] or [min(chosen, key=len)]
    return " AND ".join(_fts_or(s) for s in dict.fromkeys(map(tuple, kept)))


_MAX_SPELLINGS = 16
"""Spellings of one trigram looked up at most (beside a trigram with fewer)."""


def _nearest(positions: Sequence[int], start: int) -> int:
    """The position nearest ``start`` (the earlier of two as near)."""
    return min(positions, key=lambda i: (abs(i - start), i))


def _fts_or(spellings: Sequence[str]) -> str:
    """One trigram's spellings as an FTS5 query (an OR of strings when there are more)."""
    strings = ['"' + t.replace('"', '""') + '"' for t in spellings]
    return strings[0] if len(strings) == 1 else "(" + " OR ".join(strings) + ")"


def _spellings(trigram: str) -> list[str]:
    """Every spelling of ``trigram`` a text matched by it (``re.IGNORECASE``) can hold, as
    FTS5 sees them (which folds ASCII letters): each character's ``_same_letter``
    in turn, the first spelling the trigram itself."""
    spellings = [""]
    for ch in trigram:  # (a trigram of ASCII letters but i, k and s: one spelling)
        spellings = [s + other for s in spellings for other in _same_letter(ch)]
    return spellings


def _same_letter(ch: str) -> str:
    """``ch`` and the characters ``re.IGNORECASE`` matches it with, but ASCII letters of
    the other case (FTS5 folds those)."""
    return "".join(
        c
        for c in same_letters(ch)
        if c == ch or not c.isascii() or (not ch.isascii() and c == c.lower())
    )


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


def _term_check(term: str) -> tuple[int, str, list[str]]:
    """Whether ``r.text`` holds the long ``term`` as ``core.search.matches`` finds it, as
    an SQL condition (and its parameters), with how much of it runs in Python (0: none,
    1: for a few lookalikes only, 2: for every candidate), to put the cheap ones first.

    A term of ASCII characters none of which ``_WIDE_FOLDS`` holds matches exactly what
    its ``LIKE`` matches (each of its characters folds to its ASCII cases only, as in
    ``LIKE``): no call into Python. One that has such a letter matches where its ``LIKE``
    does, and elsewhere only where ``dsh_holds`` finds it (a text with İ, ı, K or ſ),
    asked only of the texts its ``_like_superset`` lets through. A term with a non-ASCII
    character (whose folds are many) is checked by ``dsh_holds`` alone, unless none of its
    characters has a case (CJK, digits, marks: ``lower()`` and ``upper()`` leave each
    one): ``re`` matches those as they are, as ``instr`` does."""
    if term.lower() == term == term.upper():
        return 0, "instr(r.text, ?) > 0", [term]
    if not term.isascii():
        return 2, "dsh_holds(r.text, ?)", [term]
    exact = like_pattern(term)
    wide = _like_superset(term)
    if _WIDE_FOLDS.search(term) is None or wide is None:
        return 0, "r.text LIKE ? ESCAPE '\\'", [exact]
    check = "(r.text LIKE ? ESCAPE '\\' OR (r.text LIKE ? ESCAPE '\\' AND dsh_holds(r.text, ?)))"
    return 1, check, [exact, wide, term]


def _search_sql(checks: Sequence[tuple[int, str, list[str]]], short_terms: int) -> str:
    """The newest messages that may match (see ``search_messages``), newest first: for
    the long terms, FTS5 finds the messages holding their trigrams (``_fts_query``) and
    each term's ``_term_check`` keeps those holding it whole, folded as
    ``core.search.matches`` folds it (so the window is the newest ``RANK_WINDOW`` true
    matches, as on every store), after the short terms' ``LIKE``: the conditions in C come
    first, so most lookalikes, and the messages without a short term, are dropped without
    a call into Python. Parameters: the FTS5 query (long terms only), each short term's
    ``LIKE``, the checks' in the order of ``_ordered``, the readers, the window.
    They are ranked by ``core.search.rank_hits``."""
    ordered = [sql for _, sql, _ in _ordered(checks)]
    likes = " AND r.text LIKE ? ESCAPE '\\'" * short_terms
    conditions = "".join(f" AND {sql}" for sql in ordered)
    # Only the sessions the store's user may read (issue 17), inside the window.
    readable = f" AND {_readable('o')}"
    if checks:
        # One pass in the index's order (newest first; no sort), each row read once.
        return (
            "SELECT o.id, r.seq, r.text FROM search_index AS i JOIN search_messages AS r "
            "ON r.id = i.rowid JOIN sessions AS o ON o.key = r.session "
            f"WHERE search_index MATCH ?{likes}{conditions}{readable} "
            "ORDER BY i.rowid DESC LIMIT ?"
        )
    found = (
        "SELECT r.id FROM search_messages AS r JOIN sessions AS o ON o.key = r.session "
        f"WHERE 1{likes}{readable} ORDER BY r.id DESC LIMIT ?"
    )
    return (
        "SELECT s.id, m.seq, m.text FROM search_messages AS m "
        f"JOIN sessions AS s ON s.key = m.session WHERE m.id IN ({found}) ORDER BY m.id DESC"
    )


def _ordered(
    checks: Sequence[tuple[int, str, list[str]]],
) -> list[tuple[int, str, list[str]]]:
    """The term checks, those that run no Python first (a stable order)."""
    return sorted(checks, key=lambda check: check[0])


_RANK_HERE_CHARS = 400_000
"""Candidates of a search holding at most this many characters in all are ranked in the
same call on the connection's thread (about a millisecond: what a second hand-over
between threads costs, and several under load); more are ranked off the connection (a
common word over large messages takes seconds), so that other calls proceed."""


@dataclass(frozen=True, slots=True)
class SearchStatement:
    """A search as the SQLite store runs it: its ``plan``, and the statement that finds
    its candidates (``rows``)."""

    plan: SearchPlan
    sql: str
    params: list[Any]
    readers: Sequence[str]
    short_only: bool
    """Every term has one or two characters: looked up by blocks
    (``stores.sqlite.shortgrams``), not by ``sql``."""

    def rows(self, raw: sqlite3.Connection) -> list[tuple[str, int, str]]:
        """The candidates: (session id, seq, indexed text), newest first."""
        found: Iterable[tuple[bytes, int, str]]
        if self.short_only:
            found = short_search_rows(raw, self.plan.terms, self.readers, self.plan.limit + 16)
        else:
            found = raw.execute(self.sql, self.params)
        return [(decode_text(sid), seq, text) for sid, seq, text in found]


def search_statement(query: str, limit: int, readers: Sequence[str]) -> SearchStatement | None:
    """``search_messages``' statement for the user ``readers`` names (the two parameters
    of ``_readable``); ``None`` when the query has no term. The async store and a
    one-shot read (``stores.sqlite.oneshot``) run the same statement."""
    plan = plan_search(query, limit)
    if plan is None:
        return None
    terms, wanted = plan.terms, plan.limit
    long_terms = [t for t in terms if len(t) >= MIN_INDEXED_TERM]
    short_terms = [t for t in terms if len(t) < MIN_INDEXED_TERM]
    checks = [_term_check(t) for t in long_terms]
    sql = _search_sql(checks, len(short_terms))
    params: list[Any] = []
    if long_terms:
        params.append(" AND ".join(_fts_query(t) for t in long_terms))
    params += [like_pattern(t) for t in short_terms]
    params += [p for _, _, check in _ordered(checks) for p in check]
    params += readers
    # Short terms only: the newest matches are the result (a few spare rows: every
    # hit is checked by core.search.matches, which may fold case differently).
    params.append(RANK_WINDOW if long_terms else wanted + 16)
    return SearchStatement(plan, sql, params, readers, not long_terms)


class _SearchMixin(_Decoding):
    """Searching messages, and indexing the sessions an upgrade left pending."""

    async def search_messages(self, query: str, *, limit: int = 20) -> list[SearchHit]:
        import asyncio  # (not at the top: ``stores.sqlite.oneshot`` searches without it)

        statement = search_statement(query, limit, self._readers)
        if statement is None:
            return []
        plan = statement.plan

        def body(raw: sqlite3.Connection) -> tuple[list[SearchHit] | None, list[Any]]:
            found = statement.rows(raw)
            if sum(len(text) for _, _, text in found) <= _RANK_HERE_CHARS:
                return plan.rank(found), []
            return None, found

        hits, found = await self._run_sync(body, write=False)
        if hits is not None:
            return hits
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
