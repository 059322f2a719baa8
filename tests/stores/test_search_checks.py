"""The SQLite store's lookup of a long term (issue 36): the FTS5 query of a few of its
trigrams finds every message that holds it, and the SQL check of each candidate
(``_term_check``: a ``LIKE`` where that is exact, ``dsh_holds`` where it is not) keeps
exactly the messages ``core.search.matches`` keeps."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.search import matches
from stores import SqliteSessionStore
from stores.sqlite.search import _fts_query, _holds, _search_sql, _spellings, _term_check

# The letters whose folds leave ASCII (İ ı K ſ and theirs), Greek letters with variant
# forms, LIKE's own marks, a quote for FTS5, CJK, and a few plain letters: where a LIKE or
# a trigram could go wrong.
ALPHABET = 'iIİıkKKsSſaAbB%_\\" 检索éθϑΘσςΣ'
texts = st.text(alphabet=ALPHABET, max_size=24)
terms = st.text(alphabet=ALPHABET.replace(" ", ""), min_size=3, max_size=8)


@pytest.fixture(scope="module")
def conn() -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(":memory:")
    db.create_function("dsh_holds", 2, _holds, deterministic=True)
    db.execute(
        "CREATE VIRTUAL TABLE fts USING fts5(text, tokenize = 'trigram case_sensitive 0', "
        "columnsize = 0, detail = none)"
    )
    yield db
    db.close()


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=texts, term=terms)
def test_a_term_check_keeps_what_matches_keeps(
    conn: sqlite3.Connection, text: str, term: str
) -> None:
    _, check, params = _term_check(term)
    (kept,) = conn.execute(
        f"SELECT count(*) FROM (SELECT ? AS text) AS r WHERE {check}", (text, *params)
    ).fetchone()
    assert bool(kept) == matches(text, [term])


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=texts, term=terms)
def test_the_fts_query_finds_every_message_holding_the_term(
    conn: sqlite3.Connection, text: str, term: str
) -> None:
    conn.execute("DELETE FROM fts")
    conn.execute("INSERT INTO fts (rowid, text) VALUES (1, ?)", (text,))
    found = conn.execute("SELECT rowid FROM fts WHERE fts MATCH ?", (_fts_query(term),))
    if matches(text, [term]):
        assert found.fetchall() == [(1,)]


def test_a_term_without_wide_folds_runs_no_python() -> None:
    assert _term_check("deploy")[0] == 0
    assert _term_check("100%_\\x")[0] == 0
    assert _term_check("rollback")[0] == 1  # k: the Kelvin sign matches it too
    assert _term_check("检索x")[0] == 2
    assert _term_check("检索")[0] == 0  # no case: instr
    assert _term_check("100")[0] == 0


def test_the_fts_query_covers_the_term_with_every_third_trigram() -> None:
    assert _fts_query("deployment") == '"dep" AND "loy" AND "men" AND "ent"'
    assert _fts_query("abcdef") == '"abc" AND "def"'
    assert _fts_query("abcdefg") == '"abc" AND "def" AND "efg"'


def test_a_trigram_is_looked_up_in_every_spelling_fts5_does_not_fold() -> None:
    """FTS5 folds ASCII letters only as ASCII: a text with İ, ı, the Kelvin sign or long
    s (which ``re.IGNORECASE`` matches with i, k, s) holds other trigrams than the term."""
    # A term with trigrams of one spelling looks those up (the nearest to each start)...
    assert _fts_query("retrypolicy") == '"ret" AND "ryp" AND "pol"'
    # ... one without looks up each chosen trigram in all its spellings.
    assert _fts_query("kiss") == " AND ".join(
        "(" + " OR ".join(f'"{s}"' for s in _spellings(t)) + ")" for t in ("kis", "iss")
    )
    assert set(_spellings("kis")) == {
        k + i + s for k in "k\u212a" for i in "i\u0130\u0131" for s in "s\u017f"
    }
    assert _fts_query("SKY") == '("SKY" OR "S\u212aY" OR "\u017fKY" OR "\u017f\u212aY")'
    assert '"θϑΘ"' in _fts_query("θθθ")  # more spellings than the bound: still looked up


@pytest.mark.parametrize(
    ("text", "term"),
    [("IIA", "IİA"), ("xıy", "XIY"), ("ſKy", "sky"), ("KISS", "kiſs"), ("ϑεος", "θεος")],
)
def test_a_text_spelled_with_other_folds_is_found(
    conn: sqlite3.Connection, text: str, term: str
) -> None:
    assert matches(text, [term])
    conn.execute("DELETE FROM fts")
    conn.execute("INSERT INTO fts (rowid, text) VALUES (1, ?)", (text,))
    found = conn.execute("SELECT rowid FROM fts WHERE fts MATCH ?", (_fts_query(term),))
    assert found.fetchall() == [(1,)]


async def test_a_long_term_search_reads_the_index_in_its_order_without_a_sort(
    tmp_path: Path,
) -> None:
    # The newest RANK_WINDOW matches come from FTS5 in rowid order, stopped at the window:
    # a sort would read every candidate (half the database for a common word).
    path = tmp_path / "dsh.sqlite3"
    async with await SqliteSessionStore.open(path):
        pass
    checks = [_term_check(t) for t in ("deploy", "rollback", "日本語", "ſtop")]
    with sqlite3.connect(path) as db:
        db.create_function("dsh_holds", 2, _holds, deterministic=True)
        sql = _search_sql(checks, 1)
        plan = db.execute("EXPLAIN QUERY PLAN " + sql, [None] * sql.count("?")).fetchall()
    details = " | ".join(row[3] for row in plan)
    assert "VIRTUAL TABLE" in details
    assert "TEMP B-TREE" not in details, details
