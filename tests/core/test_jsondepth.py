"""JSON nesting (issue 31 point 3): the depth scan writers use to refuse deep event data,
and the walks readers use on what a store already holds, at any depth, without recursion."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.errors import InvalidEventError
from core.jsoncodec import FrozenDict, FrozenList, dumps_js, loads_exact, thaw_json
from core.jsondepth import ELIDED, dumps_deep, elide_deep, json_depth, nests_deeper
from core.limits import MAX_JSON_DEPTH
from core.log import check_new_event, validate_new_event

DEEPER_THAN_THE_STACK = 100_000


def depth_of(value: Any) -> int:
    """The reference: containers open at once, by recursion (fine for hypothesis' sizes)."""
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    return 0


def nested(depth: int, leaf: Any = "x") -> Any:
    value = leaf
    for i in range(depth):
        value = {"k": value} if i % 2 else [value]
    return value


# Strings full of what could fool a bracket counter: brackets, quotes, backslashes.
tricky = st.text(alphabet=st.sampled_from('[]{}"\\\\ax\u00e9\U0001f680\ud800'), max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | tricky,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(tricky, inner, max_size=4),
    max_leaves=40,
)


@given(json_values)
def test_the_scan_counts_what_a_parser_nests(value: Any) -> None:
    for text in (dumps_js(value), json.dumps(value), json.dumps(value, indent=1)):
        assert json_depth(text) == depth_of(value)
        assert json_depth(text.encode("utf-8", "surrogatepass")) == depth_of(value)
        for limit in (0, 1, 2, 3):
            assert nests_deeper(text, limit) == (depth_of(value) > limit)


def test_the_scan_has_no_recursion_and_skips_strings() -> None:
    text = "[" * DEEPER_THAN_THE_STACK + "]" * DEEPER_THAN_THE_STACK
    assert json_depth(text) == DEEPER_THAN_THE_STACK
    assert json_depth('{"a":"[[[[{{{{\\"[["}') == 1
    assert not nests_deeper('["' + "[" * 1000 + '"]', 1)


@given(json_values, st.integers(min_value=1, max_value=5))
def test_elision_keeps_what_is_shallow_and_marks_the_rest(value: Any, limit: int) -> None:
    shown = elide_deep(loads_exact(dumps_js(value)), limit)
    assert depth_of(shown) <= limit
    if depth_of(value) <= limit:
        assert shown == value
    else:
        assert ELIDED in dumps_js(shown)
    assert thaw_json(loads_exact(dumps_js(value))) == value


def test_elision_and_thaw_walk_any_depth() -> None:
    deep = nested(DEEPER_THAN_THE_STACK)
    assert elide_deep(deep, 2) == {"k": ["…"]}
    assert elide_deep({"a": {"b": [1, [2]]}}, 3) == {"a": {"b": [1, "…"]}}
    frozen: Any = "x"
    for _ in range(DEEPER_THAN_THE_STACK):
        frozen = FrozenDict({"k": FrozenList([frozen])})
    thawed = thaw_json(frozen)
    for _ in range(DEEPER_THAN_THE_STACK):
        assert type(thawed) is dict and type(thawed["k"]) is list
        thawed = thawed["k"][0]
    assert thawed == "x"


@given(json_values)
def test_the_iterative_encoder_writes_what_dumps_js_writes(value: Any) -> None:
    def scalar(v: Any) -> str:
        return dumps_js(v)

    assert dumps_deep(value, scalar, scalar) == dumps_js(value)


def test_dumps_js_writes_any_depth_and_still_refuses_what_is_not_json() -> None:
    depth = 5 * sys.getrecursionlimit()
    text = "[" * depth + "1" + "]" * depth
    assert dumps_js(loads_exact_iteratively(depth)) == text
    cycle: list[Any] = [1]
    cycle.append([cycle])
    with pytest.raises(TypeError, match="circular"):
        dumps_js(cycle)
    with pytest.raises(TypeError, match="keys must be str"):
        dumps_js(nested(100, {1: 2}))
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        dumps_js(nested(100, float("nan")))


def loads_exact_iteratively(depth: int) -> list[Any]:
    value: list[Any] = [1]
    for _ in range(depth - 1):
        value = [value]
    return value


def test_event_data_may_nest_64_levels_and_no_more() -> None:
    assert MAX_JSON_DEPTH == 64
    ok = {"a": nested(MAX_JSON_DEPTH - 1)}
    validate_new_event("odd/event", ok)
    validate_new_event("odd/event", {"a": nested(MAX_JSON_DEPTH - 1, 1.5)})  # not C-encoded
    for too_deep in (
        {"a": nested(MAX_JSON_DEPTH)},
        {"a": nested(MAX_JSON_DEPTH, 1.5)},
        {"a": nested(500)},
        {"a": nested(DEEPER_THAN_THE_STACK)},
    ):
        with pytest.raises(InvalidEventError, match=r"^event data nests deeper than 64 levels$"):
            check_new_event("odd/event", too_deep)
    # Brackets inside strings are text, whatever their number.
    validate_new_event("odd/event", {"a": "[" * 10_000})


def test_the_c_encoder_takes_exactly_what_is_shallow_enough() -> None:
    """check_new_event and the stores' fast batch path skip the depth scan for what the C
    encoder wrote: it must decline every value nested deeper than the limit."""
    from core import jsoncodec

    assert jsoncodec._C_SAFE_DEPTH == MAX_JSON_DEPTH
    if jsoncodec._encode_js is None:
        pytest.skip("the C extension is not in use")
    assert jsoncodec.encode_frozen(nested_data_of(MAX_JSON_DEPTH)) is not None
    assert jsoncodec.encode_frozen(nested_data_of(MAX_JSON_DEPTH + 1)) is None


def nested_data_of(depth: int) -> dict[str, Any]:
    return {"a": nested(depth - 1)}
