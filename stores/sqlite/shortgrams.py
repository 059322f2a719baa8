"""The SQLite store's index for search terms of one or two characters (issue 36), which
the trigram index cannot hold: a block-level gram index.

The rows of ``search_messages`` fall into blocks of ``size`` consecutive ids (block
``b``: ids ``b * size`` to ``b * size + size - 1``; ``size`` is ``BLOCK`` in a database
made now, kept in ``short_grams_state``). Once a block is complete (a row with its last
id or a later one exists: new rows take ids above the highest), the set of distinct
folded characters and pairs of adjacent characters of its messages' texts
(``block_tokens``) is stored as one document of ``short_grams``, a contentless FTS5
table without positions whose rowid is the block's number. A search of short terms asks
it for the blocks holding every term's gram, newest first, and checks only the rows of
those blocks (and of the newest, not yet indexed ones: ids from ``size * blocks`` up,
``short_grams_state`` again) with the scan's own conditions (``short_search_rows``): the
same hits in the same order as a scan of every row, at the cost of the blocks that hold
the term.

Folding: a text that a short term matches (``LIKE``, which folds ASCII letters, and
``core.search.matches``, which folds as ``re.IGNORECASE`` does) holds, at that place,
characters that fold (``fold``) to the term's folded characters: ``re``'s case-insensitive
match of a character is its simple lowercase mapping, plus a few sets of lowercase letters
that share their uppercase (``_EXTRA_CASES``, e.g. ``s`` and long s, ``i`` and dotless
``ı``); a test checks ``fold`` against ``re`` over every code point.

A row deleted (a shadowed message, a deleted session) leaves its block's grams behind: the
block is checked for nothing (its rows are checked anyway). A row written with an id in an
indexed block (SQLite gives the highest id again after the highest row is deleted) is
listed in ``short_grams_loose`` (by a trigger) and always checked.
"""

from __future__ import annotations

import functools
import operator
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from core.folding import fold
from core.search import like_pattern
from stores.sqlite.sharing import _readable

BLOCK = 64
"""Rows of ``search_messages`` per document of ``short_grams`` in a database that
migration 14 makes (kept in its ``short_grams_state``, which the store reads)."""


@functools.lru_cache(maxsize=1 << 16)
def _token(gram: str) -> str:
    """A gram (one or two folded characters) as an FTS5 ``ascii`` token: the hex of its
    code points, joined by ``x``."""
    return "x".join(format(ord(c), "x") for c in gram)


def block_tokens(texts: Sequence[str]) -> str:
    """The document of a block whose messages' texts are ``texts``: the tokens of the
    distinct folded characters and adjacent pairs of characters of each text. (NUL, which
    no stored text holds, separates the texts. Each distinct word, as spaces cut them, is
    looked at once, between two spaces: a word at a text's start or end may so add a pair
    with a space that is not there, a block found for nothing, checked for nothing.)"""
    words = set(fold("\x00".join(texts)).split(" "))
    joined = " " + " ".join(words) + " "
    grams = set(joined)
    grams.update(map(operator.add, joined, joined[1:]))
    return " ".join([_token(g) for g in grams if "\x00" not in g])


def term_query(terms: Sequence[str]) -> str:
    """The FTS5 query for the blocks that may hold every one of ``terms`` (each of one or
    two characters)."""
    return " AND ".join(f'"{_token(fold(t))}"' for t in terms)


def _index_short_grams(raw: sqlite3.Connection) -> None:
    """Index every block of ``search_messages`` that is complete and not indexed yet (in
    the transaction that wrote its last rows). Before schema v14 (an upgrade's earlier
    steps write rows) there is no such index: its migration builds it from every row."""
    try:
        ((size, done),) = raw.execute(_STATE_SQL)
    except sqlite3.OperationalError as err:
        if "no such table" in str(err):
            return  # (an upgrade's step before v14)
        raise
    ((top,),) = raw.execute("SELECT max(id) FROM search_messages")
    complete = 0 if top is None else (top + 1) // size
    if complete > done:
        _index_blocks(raw, size, done, complete)


_STATE_SQL = "SELECT size, blocks FROM short_grams_state"


def _index_blocks(raw: sqlite3.Connection, size: int, first: int, end: int) -> None:
    """Write the documents of blocks (of ``size`` rows) ``first`` to ``end - 1`` (not
    indexed yet), and mark every block before ``end`` indexed."""
    rows = raw.execute(
        "SELECT id, text FROM search_messages WHERE id >= ? AND id < ? ORDER BY id",
        (first * size, end * size),
    )
    docs: list[tuple[int, str]] = []
    block, texts = first, list[str]()
    for id_, text in rows:
        if id_ // size != block:
            if texts:
                docs.append((block, block_tokens(texts)))
            block, texts = id_ // size, []
        texts.append(text)
    if texts:
        docs.append((block, block_tokens(texts)))
    raw.executemany("INSERT INTO short_grams (rowid, grams) VALUES (?, ?)", docs)
    raw.execute("UPDATE short_grams_state SET blocks = ?", (end,))


def _start_short_grams(raw: sqlite3.Connection) -> tuple[int, int]:
    """Empty ``short_grams`` (migration 14 then indexes each complete block, see
    ``_SchemaMixin._rebuild_short_grams``): the rows per block, the complete blocks."""
    raw.execute("INSERT INTO short_grams (short_grams) VALUES ('delete-all')")
    raw.execute("DELETE FROM short_grams_loose")
    raw.execute("UPDATE short_grams_state SET blocks = 0")
    ((size, _),) = raw.execute(_STATE_SQL)
    ((top,),) = raw.execute("SELECT max(id) FROM search_messages")
    return size, 0 if top is None else int((top + 1) // size)


_MERGE_GAP = 2
"""Blocks between two that hold a term checked along with them (one query instead of
two) when there are no more."""
_MERGE_MAX = 32
"""Blocks checked in one query at most (the blocks that hold the term are read as the
search goes, not all before it starts: a common term is found in the first few)."""


def _ranges(
    blocks: Iterable[int], loose: Sequence[int], size: int, done: int
) -> Iterator[tuple[int, int]]:
    """The id ranges (first, last) to check, newest first: the rows not indexed yet (from
    block ``done`` up), then ``blocks`` (of ``size`` rows, newest first; near ones joined,
    up to ``_MERGE_MAX``), and the ``loose`` ids (newest first) among them."""
    pending = sorted(loose, reverse=True)

    def with_loose(lo: int, hi: int) -> Iterator[tuple[int, int]]:
        while pending and pending[0] > hi:
            yield pending[0], pending[0]
            del pending[0]
        while pending and pending[0] >= lo:
            del pending[0]  # (in the range)
        yield lo, hi

    lo, hi, joined = done * size, _NO_END, 0
    for b in blocks:
        first = b * size
        if lo - (first + size) <= _MERGE_GAP * size and joined < _MERGE_MAX:
            lo, joined = first, joined + 1
            continue
        yield from with_loose(lo, hi)
        lo, hi, joined = first, first + size - 1, 1
    yield from with_loose(lo, hi)
    for i in pending:
        yield i, i


_NO_END = 1 << 62
"""The last id of the range of rows not indexed yet."""


def short_search_rows(
    raw: sqlite3.Connection, terms: Sequence[str], readers: Sequence[str], limit: int
) -> list[tuple[bytes, int, str]]:
    """The newest ``limit`` messages (session id as stored, seq, text; newest first)
    whose text holds every one of ``terms`` (each of one or two characters) by ``LIKE``,
    in the sessions the store's user may read (``readers``): exactly what a scan of every
    row newest first finds, from the blocks ``short_grams`` holds the terms in."""
    ((size, done),) = raw.execute(_STATE_SQL)
    loose = [i for (i,) in raw.execute("SELECT id FROM short_grams_loose")]
    blocks = (
        b
        for (b,) in raw.execute(
            "SELECT rowid FROM short_grams WHERE short_grams MATCH ? ORDER BY rowid DESC",
            (term_query(terms),),
        )
    )
    likes = " AND r.text LIKE ? ESCAPE '\\'" * len(terms)
    sql = (
        "SELECT o.id, r.seq, r.text FROM search_messages AS r JOIN sessions AS o "
        f"ON o.key = r.session WHERE r.id BETWEEN ? AND ?{likes} AND {_readable('o')} "
        "ORDER BY r.id DESC LIMIT ?"
    )
    params: list[Any] = [like_pattern(t) for t in terms]
    params += readers
    found: list[tuple[bytes, int, str]] = []
    for lo, hi in _ranges(blocks, loose, size, done):
        found += raw.execute(sql, (lo, hi, *params, limit - len(found))).fetchall()
        if len(found) >= limit:
            break
    return found
