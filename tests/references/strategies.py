"""Hypothesis strategies shared by the session-reference tests."""

from __future__ import annotations

from hypothesis import strategies as st

# Any Python str: lone surrogates and "pairs" made of two surrogate code points included.
any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)
surrogate = st.integers(0xD800, 0xDFFF).map(chr)
session_ids = st.one_of(
    any_text,
    st.lists(st.one_of(surrogate, st.characters()), max_size=12).map("".join),
    st.sampled_from(["\ud83d\ude00", "\ude00\ud83d", "a\ud800", "\udfff", "😀", ""]),
)
