"""``core.folding.same_letters``: exactly the characters ``re.IGNORECASE`` (what a search
term matches) matches a character with (``fold`` is checked against ``re`` over every
code point in tests/stores/test_sqlite_short_grams.py)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from core.folding import same_letters

CASED = [
    chr(cp)
    for cp in range(0x110000)
    if not 0xD800 <= cp < 0xE000 and (chr(cp).lower() != chr(cp) or chr(cp).upper() != chr(cp))
]


def matched(a: str, b: str) -> bool:
    return re.fullmatch(re.escape(a), b, re.IGNORECASE) is not None


def test_every_letter_it_names_is_matched_and_the_character_comes_first() -> None:
    for ch in CASED:
        letters = same_letters(ch)
        assert letters[0] == ch
        assert len(set(letters)) == len(letters), ch
        for other in letters:
            assert matched(ch, other), (ch, other)


def test_a_character_without_case_is_its_own_only() -> None:
    for cp in (*range(0x80), 0x4E2D, 0x0660, 0x1F600, 0x00DF + 0x100):
        ch = chr(cp)
        if ch not in CASED:
            assert same_letters(ch) == ch


def test_the_wide_ascii_folds() -> None:
    assert set(same_letters("i")) == {"i", "I", "\u0130", "\u0131"}
    assert set(same_letters("K")) == {"k", "K", "\u212a"}
    assert set(same_letters("\u017f")) == {"s", "S", "\u017f"}
    assert set(same_letters("\u03c3")) == {"\u03c3", "\u03a3", "\u03c2"}


@given(st.sampled_from(CASED), st.sampled_from(CASED))
def test_no_letter_re_matches_is_left_out(a: str, b: str) -> None:
    if matched(a, b):
        assert b in same_letters(a)


def test_no_letter_re_matches_is_left_out_of_a_class() -> None:
    """Every pair within each group of characters that share a fold or an uppercase."""
    groups: dict[str, list[str]] = {}
    for ch in CASED:
        groups.setdefault(ch.upper() if len(ch.upper()) == 1 else ch, []).append(ch)
    for group in groups.values():
        for a in group:
            for b in group:
                if matched(a, b):
                    assert b in same_letters(a), (a, b)
