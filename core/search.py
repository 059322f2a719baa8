"""Full-text discovery of sessions by what was said in them (issue 18): THE rules every
store and host shares.

What is indexed: each surface event's projected text (SPEC §4.6, ``indexed_text``): the
text blocks of user messages written by the user, of user steering messages and of
assistant messages, joined by newlines; a message that a replace shadows leaves the
index with it. Never reasoning, tool calls or results, plugin context, or a reference
snapshot's content (so a session does not match because it referenced another).
A compaction checkpoint's summary IS indexed: it is what the current surface says about
the messages it replaced (projection keeps it too), so a compacted session stays findable
by what was said before the compaction.

What matches: the query is cut at whitespace into terms (at most ``MAX_TERMS``, the
rest ignored); a message matches when it contains every term as a substring, case
folded the way ``re.IGNORECASE`` does it (SQLite's FTS5 trigram tokenizer folds the
same simple way). Scripts without spaces (CJK) are found as substrings. Terms of fewer
than 3 characters cannot use a trigram index: the stores look them up by a scan
(``LIKE``/``ILIKE``), which folds case for ASCII letters only; a query made only of such
short terms lists the newest matching messages first instead of ranking them.

Ranking: BM25 (``bm25_scores``, the same in every store), best first, ties newest first,
over the newest ``RANK_WINDOW`` matching messages (so a word found in half of a large
database costs a bounded search; older matches of such a word are not ranked).

A hit carries a one-line ``snippet`` around the first match, made safe for a terminal
(``core.display.mask_control``, one character for one, so offsets hold), and the
``spans`` of every match in it, so a UI highlights them without parsing any markup.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from core.display import mask_control
from core.errors import SearchQueryError
from core.jsoncodec import _speedups
from core.log import Event
from core.references.projection import project_surface
from core.surrogates import merge_surrogate_pairs

__all__ = [
    "MAX_TERMS",
    "MAX_TERM_CHARS",
    "MIN_INDEXED_TERM",
    "RANK_WINDOW",
    "SNIPPET_WIDTH",
    "SearchHit",
    "bm25_scores",
    "check_search_limit",
    "find_spans",
    "indexed_text",
    "like_pattern",
    "make_hit",
    "matches",
    "rank_hits",
    "search_terms",
    "unindexed_notice",
]

RANK_WINDOW = 1000
"""Matching messages ranked per search: the newest ones, when more match."""
MAX_TERMS = 8
"""Terms of a query looked for (later ones are ignored)."""
MIN_INDEXED_TERM = 3
"""Shorter terms are not in a trigram index: they are found by a scan."""
MAX_TERM_CHARS = 256
"""The longest term looked for. A term is a word or a phrase of one; a longer one (a paste)
costs a store time that grows with it (PostgreSQL took 18.7 s for 50,000 characters) and
finds nothing a shorter part of it would not."""
SNIPPET_WIDTH = 80
"""Characters of a snippet (an ellipsis at a cut end included)."""
_LEAD = 24
"""Characters shown before the first match, when the message is cut there."""
_K1 = 1.2
_B = 0.75


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One message that matched: where it is, a safe one-line ``snippet`` and the
    ``spans`` (``(start, end)`` offsets into ``snippet``, sorted, not overlapping) of the
    query's terms in it. ``score``: higher is better (its scale is the store's own)."""

    session_id: str
    seq: int
    snippet: str
    spans: tuple[tuple[int, int], ...]
    score: float = 0.0


def check_search_limit(limit: object) -> int:
    """A positive int (``ValueError`` otherwise)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a positive int, not {limit!r}")
    return limit


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def search_terms(query: str) -> list[str]:
    """The distinct terms of ``query`` (split at whitespace), at most ``MAX_TERMS``;
    none for a blank query. NUL and lone surrogates (undecodable bytes of a command
    line, JSON escapes) become U+FFFD, as in the index (``indexed_text``): no store can
    bind them, and they match what the index holds in their place. A term longer than
    ``MAX_TERM_CHARS`` is a ``SearchQueryError``."""
    if not isinstance(query, str):
        raise TypeError("query must be a str")
    out: list[str] = []
    seen: set[str] = set()
    for term in _UNSTORABLE.sub("\ufffd", merge_surrogate_pairs(query)).split():
        if len(term) > MAX_TERM_CHARS:
            raise SearchQueryError(
                f"a search term may have at most {MAX_TERM_CHARS} characters "
                f"(one has {len(term):,})"
            )
        key = term.casefold()
        if key not in seen:
            seen.add(key)
            out.append(term)
        if len(out) == MAX_TERMS:
            break
    return out


def indexed_text(event: Event) -> str | None:
    """The text of ``event`` that the search index holds (``None``: not indexed): its
    projected text, each surrogate pair its character (SPEC §4.1), and each NUL and lone
    surrogate (which no index column can hold) replaced by U+FFFD, one character for one."""
    if event.surface_op is None:
        return None
    projected = project_surface((event,))
    if not projected:
        return None
    return _UNSTORABLE.sub("\ufffd", merge_surrogate_pairs(projected[0].text))


def _pattern(terms: Sequence[str]) -> re.Pattern[str]:
    # Longest first, so a term that contains another wins the overlap.
    ordered = sorted(terms, key=len, reverse=True)
    return re.compile("|".join(re.escape(t) for t in ordered), re.IGNORECASE)


def find_spans(text: str, terms: Sequence[str]) -> list[tuple[int, int]]:
    """Every (non-overlapping) occurrence of any term in ``text``, in order."""
    if not terms:
        return []
    return [m.span() for m in _pattern(terms).finditer(text)]


def matches(text: str, terms: Sequence[str]) -> bool:
    """Whether ``text`` contains every term (the matching rule of every store)."""
    return bool(terms) and all(
        re.search(re.escape(t), text, re.IGNORECASE) is not None for t in terms
    )


def like_pattern(term: str) -> str:
    """``%term%`` for ``LIKE … ESCAPE '\\'`` (its ``%``, ``_`` and ``\\`` escaped)."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _one_line(text: str) -> str:
    return mask_control(text.replace("\r", " ").replace("\n", " ").replace("\t", " "))


def make_hit(
    session_id: str, seq: int, text: str, terms: Sequence[str], score: float = 0.0
) -> SearchHit:
    """The hit for message ``text``: a window of ``SNIPPET_WIDTH`` characters starting a
    little before the first match (``…`` marks a cut end), and the matches inside it."""
    return _make_hit(session_id, seq, text, _pattern(terms) if terms else None, score)


def _make_hit(
    session_id: str, seq: int, text: str, pattern: re.Pattern[str] | None, score: float
) -> SearchHit:
    spans = [m.span() for m in pattern.finditer(text)] if pattern is not None else []
    first = spans[0][0] if spans else 0
    start = max(0, first - _LEAD) if len(text) > SNIPPET_WIDTH else 0
    # Show as much as fits: a match near the end pulls the window back.
    start = max(0, min(start, len(text) - (SNIPPET_WIDTH - 1)))
    prefix = "…" if start > 0 else ""
    room = SNIPPET_WIDTH - len(prefix)
    end = len(text) if len(text) - start <= room else start + room - 1
    suffix = "…" if end < len(text) else ""
    snippet = prefix + _one_line(text[start:end]) + suffix
    shift = len(prefix) - start
    kept = tuple(
        (max(a, start) + shift, min(b, end) + shift) for a, b in spans if b > start and a < end
    )
    return SearchHit(session_id, seq, snippet, kept, score)


def bm25_scores(texts: Sequence[str], terms: Sequence[str]) -> list[float]:
    """BM25 of each text for ``terms`` (k1 1.2, b 0.75), over ``texts`` as the corpus:
    a term's count in a text (case folded) weighs more in a short text than in a long
    one, and a rarer term more than a common one."""
    if not texts:
        return []
    count = _counter(terms)
    return _bm25(texts, [count(text) for text in texts], len(terms))


_fold_counts: Callable[[list[str], tuple[str, ...], int, int], Any] | None = (
    getattr(_speedups, "fold_counts", None) if _speedups is not None else None
)
"""``core._speedups.fold_counts`` (``_matching``'s loop in C), where it is built."""

_INTO_ASCII = "\u0130\u0131\u017f\u212a"
"""The characters (İ ı ſ K) that ``re.IGNORECASE`` matches with an ASCII one, or whose
``lower()`` holds one: every other lower-cases to non-ASCII only, and matches no ASCII
character (a test checks every code point)."""


def _into_ascii(text: str) -> bool:
    """Whether ``text`` holds one of ``_INTO_ASCII``'s characters (four ``in``: a regex
    class costs 15 times as much)."""
    return "\u0130" in text or "\u0131" in text or "\u017f" in text or "\u212a" in text


def _counter(terms: Sequence[str]) -> Callable[[str], list[int]]:
    """``counts(text)``: how many times each term is in ``text`` (non-overlapping, case
    folded as ``re.IGNORECASE`` folds): its ``findall``, in fewer steps where that is the
    same (a test checks every code point these rules rest on):

    * a term of uncased characters (CJK, digits, marks: ``lower()`` and ``upper()`` leave
      it) is matched literally by ``re`` too: ``text.count(term)``;
    * a term of ASCII, in a text without ``_INTO_ASCII``'s characters, matches where its
      lower case is in the text's: each ASCII character folds to its ASCII cases only, and
      the others lower-case to non-ASCII, so a match in ``text.lower()`` is one in ``text``
      and none spans a non-ASCII character."""
    rules: list[tuple[int, str, re.Pattern[str]]] = []
    for term in terms:
        pattern = re.compile(re.escape(term), re.IGNORECASE)
        if term.lower() == term == term.upper():
            rules.append((1, term, pattern))
        elif term.isascii():
            rules.append((0, term.lower(), pattern))
        else:
            rules.append((2, term, pattern))
    kinds = {kind for kind, _, _ in rules}
    keys = [key for _, key, _ in rules]
    patterns = [pattern for _, _, pattern in rules]

    # The common cases without a branch per term (each is called once per message).
    def plain(text: str) -> list[int]:
        return [text.count(key) for key in keys]

    def ascii_terms(text: str) -> list[int]:
        if text.isascii() or not _into_ascii(text):
            low = text.lower()
            return [low.count(key) for key in keys]
        return [len(pattern.findall(text)) for pattern in patterns]

    def mixed(text: str) -> list[int]:
        low = text.lower() if text.isascii() or not _into_ascii(text) else None
        out = []
        for kind, key, pattern in rules:
            if kind == 1:
                out.append(text.count(key))
            elif kind == 0 and low is not None:
                out.append(low.count(key))
            else:
                out.append(len(pattern.findall(text)))
        return out

    return plain if kinds == {1} else ascii_terms if kinds == {0} else mixed


def _bm25(texts: Sequence[str], counts: Sequence[Sequence[int]], terms: int) -> list[float]:
    """``bm25_scores`` of ``texts`` from each one's ``counts`` of the terms."""
    n = len(texts)
    avg = sum(len(t) for t in texts) / n or 1.0
    idf = []
    for i in range(terms):
        df = sum(1 for row in counts if row[i])
        idf.append(math.log(1 + (n - df + 0.5) / (df + 0.5)))
    k = _K1 + 1
    if terms == 1:
        # The sum of one term is that term (0 + x, exactly), without a generator a message.
        (w,) = idf
        return [
            w * tf * k / (tf + _K1 * (1 - _B + _B * len(text) / avg))
            for text, (tf,) in zip(texts, counts, strict=True)
        ]
    out = []
    if terms == 2:
        w0, w1 = idf
        for text, (tf0, tf1) in zip(texts, counts, strict=True):
            norm = _K1 * (1 - _B + _B * len(text) / avg)
            out.append(sum((w0 * tf0 * k / (tf0 + norm), w1 * tf1 * k / (tf1 + norm))))
        return out
    for text, row in zip(texts, counts, strict=True):
        norm = _K1 * (1 - _B + _B * len(text) / avg)
        out.append(sum([w * tf * k / (tf + norm) for w, tf in zip(idf, row, strict=True)]))
    return out


def _matching(
    found: Iterable[tuple[str, int, str]], terms: Sequence[str]
) -> tuple[list[tuple[str, int, str]], list[list[int]]]:
    """The newest ``RANK_WINDOW`` of ``found`` that hold every term, and their counts
    (``_counter``): in C (``fold_counts``) where every term is ASCII or without case, but
    for the texts with one of ``_INTO_ASCII``'s characters."""
    count = _counter(terms)
    rows: list[tuple[str, int, str]] = []
    counts: list[list[int]] = []
    if _fold_counts is not None and all(t.isascii() or t.lower() == t == t.upper() for t in terms):
        found = found if isinstance(found, list) else list(found)
        texts = [row[2] for row in found]
        keys = tuple(t.lower() for t in terms)
        at = 0
        while at < len(texts) and len(rows) < RANK_WINDOW:
            kept, kept_counts, at = _fold_counts(texts, keys, at, RANK_WINDOW - len(rows))
            rows += [found[i] for i in kept]
            counts += kept_counts
            if at < len(texts) and len(rows) < RANK_WINDOW:  # a text C leaves to Python
                row_counts = count(texts[at])
                if all(row_counts):
                    rows.append(found[at])
                    counts.append(row_counts)
                at += 1
        return rows, counts
    for row in found:
        row_counts = count(row[2])
        if all(row_counts):
            rows.append(row)
            counts.append(row_counts)
            if len(rows) == RANK_WINDOW:
                break
    return rows, counts


def rank_hits(
    found: Iterable[tuple[str, int, str]], terms: Sequence[str], limit: int
) -> list[SearchHit]:
    """``found`` (session id, seq, text; newest first) that match ``terms``, as hits
    ranked by ``bm25_scores`` over the newest ``RANK_WINDOW`` of them (ties newest first),
    at most ``limit``. A query of short terms only lists the newest matches first (see the
    module doc)."""
    if not terms:
        return []
    rows: list[tuple[str, int, str]] = []
    if any(len(t) >= MIN_INDEXED_TERM for t in terms):
        # A text matches when each term's count in it is not 0 (``matches``), and the
        # counts are what BM25 needs: one pass.
        rows, counts = _matching(found, terms)
        scores = _bm25([text for _, _, text in rows], counts, len(terms)) if rows else []
        # The best ``limit`` (as ``sorted(...)[:limit]``, stable: ties newest first).
        order = heapq.nsmallest(limit, range(len(rows)), key=lambda i: -scores[i])
    else:
        patterns = [re.compile(re.escape(t), re.IGNORECASE) for t in terms]
        for row in found:
            if all(p.search(row[2]) is not None for p in patterns):
                rows.append(row)
                if len(rows) == min(limit, RANK_WINDOW):
                    break
        scores = [0.0] * len(rows)
        order = list(range(len(rows)))
    pattern = _pattern(terms)
    return [_make_hit(*rows[i], pattern, scores[i]) for i in order[:limit]]


def unindexed_notice(count: int) -> str | None:
    """What a host says when ``count`` sessions of a read-only database await indexing
    (an upgrade's backlog that only a writer can index): search cannot find them yet.
    ``None`` when there are none."""
    if count < 1:
        return None
    what, they = ("1 session is", "it is") if count == 1 else (f"{count} sessions are", "they are")
    return (
        f"{what} not indexed yet (the database is read-only); {they} indexed the next "
        "time dsh opens it for writing"
    )
