"""``core.search.rank_hits`` (issue 36: one pass of counts, ASCII texts counted lower-cased,
the best ``limit`` picked instead of all sorted) gives exactly what its definition gives:
the model below is that definition as it was written before, one rule per line."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import core.search
from core.jsoncodec import SPEEDUPS
from core.search import MIN_INDEXED_TERM, SearchHit, bm25_scores, make_hit, matches, rank_hits


def model_bm25(texts: Sequence[str], terms: Sequence[str]) -> list[float]:
    if not texts:
        return []
    patterns = [re.compile(re.escape(t), re.IGNORECASE) for t in terms]
    counts = [[len(p.findall(text)) for p in patterns] for text in texts]
    n = len(texts)
    avg = sum(len(t) for t in texts) / n or 1.0
    idf = []
    for i in range(len(patterns)):
        df = sum(1 for row in counts if row[i])
        idf.append(math.log(1 + (n - df + 0.5) / (df + 0.5)))
    out = []
    for text, row in zip(texts, counts, strict=True):
        norm = 1.2 * (1 - 0.75 + 0.75 * len(text) / avg)
        out.append(sum(w * tf * 2.2 / (tf + norm) for w, tf in zip(idf, row, strict=True)))
    return out


def model_rank(
    found: Sequence[tuple[str, int, str]], terms: Sequence[str], limit: int
) -> list[SearchHit]:
    rows = [(sid, seq, text) for sid, seq, text in found if matches(text, terms)]
    del rows[core.search.RANK_WINDOW :]
    if any(len(t) >= MIN_INDEXED_TERM for t in terms):
        scores = model_bm25([text for _, _, text in rows], terms)
        order = sorted(range(len(rows)), key=lambda i: -scores[i])
    else:
        scores = [0.0] * len(rows)
        order = list(range(len(rows)))
    return [make_hit(*rows[i], terms, scores[i]) for i in order[:limit]]


# ASCII and not, the letters that fold out of ASCII (İ ı K ſ), a letter that grows when
# lower-cased (İ), Greek final sigma, CJK, regex marks, line breaks.
ALPHABET = "abAB iIİıkKKsSſσςΣ检索.*\n\t"
texts = st.text(alphabet=ALPHABET, max_size=120)
terms = st.lists(
    st.text(
        alphabet=ALPHABET.replace(" ", "").replace("\n", "").replace("\t", ""),
        min_size=1,
        max_size=4,
    ),
    max_size=3,
)


FOLDS = [core.search._fold_counts, None] if core.search._fold_counts is not None else [None]


def test_the_c_counts_are_built_where_the_other_speedups_are() -> None:
    assert (core.search._fold_counts is not None) == SPEEDUPS


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    data=st.data(),
    terms=terms.filter(
        lambda ts: bool(ts) and all(t.isascii() or t.lower() == t == t.upper() for t in ts)
    ),
)
def test_fold_counts_counts_what_the_python_counter_counts(
    data: st.DataObject, terms: list[str]
) -> None:
    fold = core.search._fold_counts
    if fold is None:
        return
    texts = data.draw(st.lists(texts_of(terms), max_size=10))
    start = data.draw(st.integers(0, len(texts)))
    need = data.draw(st.integers(1, 12))
    kept, counts, stop = fold(texts, tuple(t.lower() for t in terms), start, need)
    count = core.search._counter(terms)
    expected = [i for i in range(start, stop) if all(count(texts[i]))]
    assert kept == expected
    assert counts == [count(texts[i]) for i in kept]
    # It stops at the need, at a text with İ ı ſ K, or at the end.
    assert len(kept) == need or stop == len(texts) or core.search._into_ascii(texts[stop])
    assert all(not core.search._into_ascii(texts[i]) for i in range(start, stop))


def test_fold_counts_refuses_what_it_cannot_count() -> None:
    fold = core.search._fold_counts
    if fold is None:
        return
    with pytest.raises(ValueError):
        fold(["x"], ("Abc",), 0, 1)
    with pytest.raises(ValueError):
        fold(["x"], (), 0, 1)
    with pytest.raises(ValueError):
        fold(["x"], ("é",), 0, 1)  # cased: its folds are re's to count
    with pytest.raises(ValueError):
        fold(["x"], ("",), 0, 1)
    assert fold(["检索 检索x", "检"], ("检索", "x"), 0, 5) == ([0], [[2, 1]], 2)
    with pytest.raises(TypeError):
        fold([b"x"], ("abc",), 0, 1)
    assert fold(["abc"], ("abc",), 5, 1) == ([], [], 5)


def texts_of(terms: list[str]) -> st.SearchStrategy[str]:
    """Texts made of the terms (in any case) and other characters, so most match."""
    piece = st.one_of(
        texts.map(lambda t: t[:8]),
        st.sampled_from(terms or ["x"]).flatmap(
            lambda t: st.sampled_from([t, t.upper(), t.lower(), t.swapcase()])
        ),
    )
    return st.lists(piece, max_size=12).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), terms=terms, limit=st.integers(1, 6), window=st.sampled_from([2, 5, 1000]))
def test_rank_hits_is_its_definition(
    data: st.DataObject, terms: list[str], limit: int, window: int
) -> None:
    found = data.draw(st.lists(texts_of(terms), max_size=12))
    rows = [(f"s{i % 3}", i, text) for i, text in enumerate(found)]
    with patch.object(core.search, "RANK_WINDOW", window):
        expected = model_rank(rows, terms, limit)
        for fold in FOLDS:  # in C where it is built, and in Python
            with patch.object(core.search, "_fold_counts", fold):
                assert rank_hits(iter(rows), terms, limit) == expected
                assert rank_hits(rows, terms, limit) == expected


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), terms=terms)
def test_bm25_scores_are_their_definition(data: st.DataObject, terms: list[str]) -> None:
    found = data.draw(st.lists(texts_of(terms), min_size=1, max_size=8))
    assert bm25_scores(found, terms) == model_bm25(found, terms)


def test_the_shortcuts_of_counting_rest_on_every_code_point() -> None:
    # _counter: an uncased character (lower() and upper() leave it) is one re matches
    # literally; the non-ASCII characters that match an ASCII one under re.IGNORECASE, or
    # lower-case to one, are _INTO_ASCII's.
    import _sre

    every = "".join(chr(c) for c in range(0x80, 0x110000) if not 0xD800 <= c <= 0xDFFF)
    assert not [c for c in every if c.lower() == c == c.upper() and _sre.unicode_iscased(ord(c))]
    into_ascii = {c for c in every if any(x < "\x80" for x in c.lower())}
    for code in range(1, 0x80):
        into_ascii |= set(re.findall(re.escape(chr(code)), every, re.IGNORECASE))
    assert into_ascii == set(core.search._INTO_ASCII)


def test_the_letters_that_fold_into_ascii_are_counted_as_re_counts_them() -> None:
    texts = ["İxy", "ıxy", "ſtop", "\u212aelvin", "ixy stop kelvin", "检索"]
    rows = [("s", i, text) for i, text in enumerate(texts)]
    for terms in (["ixy"], ["stop"], ["kel"], ["ixy", "STOP", "检索"], ["检索"]):
        assert rank_hits(rows, terms, 5) == model_rank(rows, terms, 5)
        assert bm25_scores([t for _, _, t in rows], terms) == model_bm25(
            [t for _, _, t in rows], terms
        )
