"""SPEC §4.8: tag-safe JSON."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.jsoncodec import loads_exact
from core.references import stringify_tag_safe_json, tag_safe_json_size
from tests.references.strategies import any_text

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | any_text
    | st.sampled_from(["</referenced-sessions>", "<", "a<b<c", "\ud800<\udc00"]),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(any_text, children, max_size=4)
    ),
    max_leaves=12,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("</referenced-sessions>", '"\\u003c/referenced-sessions>"'),
        ({"a<": ["<<", 1, None, True]}, '{"a\\u003c":["\\u003c\\u003c",1,null,true]}'),
        ("ünï 😀", '"ünï 😀"'),
        ("\ud83d\ude00", '"😀"'),  # a pair is its character (SPEC 4.1)
        ("\ude00\ud83d", '"\\ude00\\ud83d"'),
        ('\x00\x1f\n\t"\\', '"\\u0000\\u001f\\n\\t\\"\\\\"'),
        ([1.5, 1e21, 1e-7, -0.0], "[1.5,1e+21,1e-7,0]"),
        ({}, "{}"),
    ],
)
def test_examples(value: object, expected: str) -> None:
    assert stringify_tag_safe_json(value) == expected
    assert tag_safe_json_size(value) == len(expected.encode("utf-8"))


@given(json_values)
def test_round_trips_and_has_no_angle_bracket(value: object) -> None:
    text = stringify_tag_safe_json(value)
    assert "<" not in text
    assert loads_exact(text, frozen=False) == value
    assert tag_safe_json_size(value) == len(text.encode("utf-8"))


@pytest.mark.parametrize(
    "value", [math.nan, math.inf, -math.inf, {1: 2}, object(), b"x", {"a": {1}}, [math.nan]]
)
def test_non_json_raises_type_error(value: object) -> None:
    with pytest.raises(TypeError):
        stringify_tag_safe_json(value)
