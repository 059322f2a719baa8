"""``core/_speedups.c`` against the pure-Python versions it replaces in ``core.jsoncodec``.

The C module must be built wherever the project is installed with a compiler (CI is), and
each of its functions must agree with its Python reference on every input.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core import jsoncodec, log
from core.jsoncodec import (
    _ESCAPED_PAIR,
    FrozenDict,
    FrozenList,
    _freeze_list,
    _freeze_object,
    _py_escaped_pair,
    _py_utf8_len,
)
from core.log import Event, Replace, ValidatedEvent, _py_build_events, build_events
from core.surrogates import has_surrogate_pair
from tests.children import ROOT
from tests.core.test_speedups_reads import same

speedups: Any = importlib.import_module("core._speedups")

# Every code point, lone surrogates included, so all three str kinds show up.
any_text = st.text(st.characters(blacklist_categories=()))
wide = st.sampled_from(["", "é", "ÿ", "中", "\ud83d", "\ude00", "😀", "\U0010ffff"])


def test_the_c_extension_is_built_and_in_use() -> None:
    assert jsoncodec.SPEEDUPS, (
        "core._speedups was not compiled: install a C compiler and the Python headers, "
        "then reinstall dsh"
    )
    assert jsoncodec.utf8_len is speedups.utf8_len


# ----------------------------------------------------------------------------- utf8_len


@given(any_text)
def test_utf8_len_agrees(text: str) -> None:
    assert speedups.utf8_len(text) == _py_utf8_len(text)
    assert _py_utf8_len(text) == len(text.encode("utf-8", "surrogatepass"))


@given(st.lists(st.sampled_from(["a", "\x7f", "\x80", "\xff", "\u07ff", "\u0800"]) | wide))
def test_utf8_len_at_every_boundary(parts: list[str]) -> None:
    text = "".join(parts)
    assert speedups.utf8_len(text) == len(text.encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize("size", [0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000])
def test_utf8_len_of_long_latin1_runs(size: int) -> None:
    for text in ("é" * size, "a" * size + "é", "é" + "a" * size, ("aé" * size)[:size]):
        assert speedups.utf8_len(text) == len(text.encode())


def test_utf8_len_rejects_what_is_not_a_str() -> None:
    for bad in (b"abc", None, 3, ["a"]):
        with pytest.raises(TypeError, match="needs a str"):
            speedups.utf8_len(bad)


# ------------------------------------------------------------------------- escaped_pair

# Text built mostly of the pieces of the pattern, so near-misses are common.
pattern_pieces = st.sampled_from(
    ["\\", "u", "U", "d", "D", "8", "9", "a", "b", "A", "B", "c", "C", "e", "f", "F", "0", "g"]
)
pair_text = st.lists(pattern_pieces | wide | st.sampled_from(["\\ud83d", "\\ude00", "\\\\"]))


@given(pair_text)
def test_escaped_pair_agrees_with_the_regex(parts: list[str]) -> None:
    text = "".join(parts)
    assert speedups.escaped_pair(text) is _py_escaped_pair(text)


@given(any_text, any_text, st.sampled_from(["\\ud83d\\ude00", "\\uDBFF\\uDFFF", "\\uD800\\udc00"]))
def test_an_escaped_pair_is_found_anywhere_in_any_kind(head: str, tail: str, pair: str) -> None:
    text = head + pair + tail
    assert _ESCAPED_PAIR.search(text) is not None
    assert speedups.escaped_pair(text) is True


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\\ud83d\\ude0",  # one short
        "\\ud83d\\u0041",  # low half is not a low surrogate
        "\\udc00\\ud83d",  # wrong order
        "\\ud83d \\ude00",
        "\\ud7ff\\ude00",
        "x\\ud83d\\ude0",
    ],
)
def test_near_misses_are_not_pairs(text: str) -> None:
    assert speedups.escaped_pair(text) is False
    assert speedups.escaped_pair(text + "中") is False
    assert speedups.escaped_pair(text + "😀") is False


def test_escaped_pair_rejects_what_is_not_a_str() -> None:
    with pytest.raises(TypeError, match="needs a str"):
        speedups.escaped_pair(b"\\ud83d\\ude00")


# ------------------------------------------------------------------------------ freezing

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | any_text,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(any_text, children, max_size=4)
    ),
    max_leaves=30,
)


def frozen_shape(value: Any) -> Any:
    """The value with every container's exact type spelled out."""
    if isinstance(value, dict):
        return (type(value).__name__, {k: frozen_shape(v) for k, v in value.items()})
    if isinstance(value, list):
        return (type(value).__name__, [frozen_shape(v) for v in value])
    return value


@given(json_values)
def test_freezing_agrees(value: Any) -> None:
    text = json.dumps(value)
    by_c = json.JSONDecoder(object_hook=speedups.freeze_object).decode(text)
    by_python = json.JSONDecoder(object_hook=_freeze_object).decode(text)
    if type(by_c) is list:
        by_c, by_python = speedups.freeze_list(by_c), _freeze_list(by_python)
    assert by_c == value
    assert frozen_shape(by_c) == frozen_shape(by_python)
    assert "'list'" not in repr(frozen_shape(by_c)) and "'dict'" not in repr(frozen_shape(by_c))


def test_freezing_is_deep_and_read_only() -> None:
    value = speedups.freeze_object({"a": [1, [2, [3]]], "b": "x"})
    assert type(value) is FrozenDict
    assert type(value["a"]) is FrozenList and type(value["a"][1][1]) is FrozenList
    with pytest.raises(TypeError):
        value["a"][1].append(4)


def test_freezing_a_very_deep_list_raises_instead_of_crashing() -> None:
    deep: list[Any] = []
    for _ in range(200_000):
        deep = [deep]
    with pytest.raises(RecursionError):
        speedups.freeze_list(deep)
    with pytest.raises(RecursionError):
        speedups.freeze_object({"deep": deep})


def test_freezing_rejects_other_types() -> None:
    with pytest.raises(TypeError, match="needs a dict"):
        speedups.freeze_object(FrozenDict())
    with pytest.raises(TypeError, match="needs a list"):
        speedups.freeze_list((1, 2))


def test_set_types_checks_what_it_is_given() -> None:
    with pytest.raises(TypeError):
        speedups.set_types(list, dict)
    with pytest.raises(TypeError):
        speedups.set_types("FrozenDict", "FrozenList")
    # the registered types are untouched by the failed calls
    assert type(speedups.freeze_object({})) is FrozenDict


def test_frozen_types_with_their_own_constructors_are_called_as_such() -> None:
    """Types that construct like dict and list are built directly; any other is called."""
    made: list[str] = []

    class LoggingDict(dict[str, Any]):
        def __init__(self, *args: Any) -> None:
            made.append("dict")
            super().__init__(*args)

    class LoggingList(list[Any]):
        def __init__(self, *args: Any) -> None:
            made.append("list")
            super().__init__(*args)

    speedups.set_types(LoggingDict, LoggingList)
    try:
        value = speedups.freeze_object({"a": [1, [2]], "b": {"c": 3}})
        assert made == ["list", "list", "dict"]
        made.clear()
        text, copy = speedups.encode_frozen({"a": [1, (2,)], "b": {"c": 3}}, True)
    finally:
        speedups.set_types(FrozenDict, FrozenList)
    assert made == ["list", "list", "dict", "dict"]  # innermost first
    assert text == '{"a":[1,[2]],"b":{"c":3}}' and copy == {"a": [1, [2]], "b": {"c": 3}}
    assert type(copy) is LoggingDict and type(copy["b"]) is LoggingDict
    assert type(copy["a"]) is LoggingList and type(copy["a"][1]) is LoggingList
    assert type(value) is LoggingDict and type(value["a"][1]) is LoggingList
    assert value == {"a": [1, [2]], "b": {"c": 3}}
    assert type(speedups.freeze_object({"x": []})["x"]) is FrozenList


PURE_CHILD = r"""
import asyncio, json
from core import jsoncodec
from core.surrogates import has_surrogate_pair
from core.jsoncodec import FrozenDict, FrozenList, loads_exact, utf8_len
from core.log import text_block
from core.references import SessionReferenceInput, SessionReferenceService
from stores import MemorySessionStore, SessionQuery

assert not jsoncodec.SPEEDUPS and utf8_len is jsoncodec._py_utf8_len
value = loads_exact('[{"a": ["\\ud83d\\ude00", [1]]}, "\\ud83d"]')
assert type(value) is FrozenList and type(value[0]) is FrozenDict
assert type(value[0]["a"][1]) is FrozenList and value[0]["a"][0] == "\U0001f600"
assert utf8_len("é\ud83d😀") == 9

async def main():
    store = MemorySessionStore()
    target = await store.create_session("t")
    await store.create_session("s")
    await store.append("s", "user/message", {"id": "1", "role": "user",
        "content": [text_block("hello " * 50_000)], "source": {"kind": "user"}}, surface_op="append")
    prepared = await SessionReferenceService(SessionQuery(store)).prepare(
        target, "x", [SessionReferenceInput("s", "S")])
    print("prepared", len(prepared.additional_context["content"][0]["text"]))

asyncio.run(main())
"""


def test_the_pure_python_fallback_runs_end_to_end() -> None:
    """What runs where the extension could not be built (forced by DSH_PURE_PYTHON)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DSH_PURE_PYTHON": "1"}
    done = subprocess.run(
        [sys.executable, "-c", PURE_CHILD],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("prepared ")
    assert 60_000 < int(done.stdout.split()[1]) < 70_000  # retained within the default budget


def test_freezing_needs_str_keys_where_it_replaces_a_value() -> None:
    with pytest.raises(TypeError, match="str keys"):
        speedups.freeze_object({1: [2]})


# ------------------------------------------------------------------------------- c_safe


class _Int(int):
    pass


class _Str(str):
    pass


atoms = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=4),
    st.builds(_Int, st.integers(0, 9)),
    st.builds(_Str, st.text(max_size=2)),
    st.just(b"x"),
)
keys = st.one_of(st.text(max_size=3), st.integers(0, 3), st.builds(_Str, st.text(max_size=2)))
json_like = st.recursive(
    atoms,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.lists(inner, max_size=4).map(FrozenList),
        st.dictionaries(keys, inner, max_size=4),
        st.dictionaries(st.text(max_size=3), inner, max_size=4).map(FrozenDict),
        st.sets(st.integers(), max_size=2),
    ),
    max_leaves=20,
)


@given(json_like)
def test_c_safe_agrees(value: Any) -> None:
    assert speedups.c_safe(value) is jsoncodec._py_c_safe(value)


def test_c_safe_stops_at_the_same_depth() -> None:
    assert jsoncodec._is_c_safe is speedups.c_safe
    for depth in (62, 63, 64, 65, 200):
        for make in (lambda v: [v], lambda v: {"k": v}, lambda v: (v,)):
            value: Any = 1
            for _ in range(depth):
                value = make(value)
            assert speedups.c_safe(value) is jsoncodec._py_c_safe(value), depth
    cycle: list[Any] = []
    cycle.append(cycle)
    assert speedups.c_safe(cycle) is False


# ---------------------------------------------------------------------------- join_utf8

# Texts without lone surrogates (valid UTF-8), every kind of str among them.
utf8_texts = st.text(st.characters(blacklist_categories=("Cs",)))


@given(st.lists(utf8_texts | wide.filter(lambda c: not "\ud800" <= c <= "\udfff")))
def test_join_utf8_agrees(texts: list[str]) -> None:
    parts = [text.encode() for text in texts]
    out = speedups.join_utf8(parts)
    expected = jsoncodec._py_join_utf8(parts)
    assert out == expected == "".join(texts)
    # The same canonical str (kind and size), not just equal characters. Compared on the
    # doubled strs (a repeat keeps its str's kind): a one-character Latin-1 result of
    # ``bytes.decode`` is CPython's shared singleton, whose size grows once anything has
    # cached its UTF-8.
    assert sys.getsizeof(out * 2) == sys.getsizeof(expected * 2)
    assert hash(out) == hash(expected)
    assert out.isascii() == expected.isascii()


@given(st.sampled_from(["a", "é", "中", "😀"]), st.integers(250, 700))
def test_join_utf8_across_its_slices(char: str, count: int) -> None:
    # A part longer than the C version's 256-byte slices, cut between characters.
    text = "x" * (count % 7) + char * count
    assert speedups.join_utf8([text.encode(), b"!"]) == text + "!"


@pytest.mark.parametrize(
    "parts", [[b"\xff"], [b"a", b"\xed\xa0\x80"], [b"\xe4\xb8"], [b"\x80" * 9000]]
)
def test_join_utf8_refuses_what_is_not_utf8(parts: list[bytes]) -> None:
    with pytest.raises(ValueError):  # UnicodeDecodeError is one
        speedups.join_utf8(parts)
    with pytest.raises(ValueError):
        jsoncodec._py_join_utf8(parts)


@pytest.mark.parametrize("parts", [(b"a",), [b"a", "b"], [bytearray(b"a")]])
def test_join_utf8_needs_a_list_of_bytes(parts: Any) -> None:
    with pytest.raises(TypeError):
        speedups.join_utf8(parts)


# ------------------------------------------------------------------------ encode_frozen


# Hostile strings: every code point (lone surrogates, control characters, quotes,
# backslashes, non-ASCII of every width), and text made of JSON's escapes.
hostile_text = any_text | st.lists(
    st.sampled_from(['"', "\\", "\b", "\f", "\n", "\r", "\t", "\x00", "\x1f", "\x7f", "/"])
    | wide
    | st.sampled_from(["\ud83d\ude00", "\\ud83d\\ude00", "\u2028", "a"])
).map("".join)
encodable_atoms = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, -1, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 10**30]),
    hostile_text,
)
encodable = st.recursive(
    encodable_atoms,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.lists(inner, max_size=4).map(FrozenList),
        st.dictionaries(hostile_text, inner, max_size=4),
        st.dictionaries(st.text(max_size=3), inner, max_size=4).map(FrozenDict),
    ),
    max_leaves=20,
)


def _fits(value: Any) -> bool:
    """Whether every int of ``value`` fits in 64 bits (what ``encode_frozen`` takes)."""
    if type(value) is int:
        return -(2**63) <= value < 2**63
    if isinstance(value, dict):
        return all(_fits(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(_fits(v) for v in value)
    return True


def _holds_pair(value: Any) -> bool:
    if isinstance(value, str):
        return has_surrogate_pair(value)
    if isinstance(value, dict):
        return any(_holds_pair(k) or _holds_pair(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_holds_pair(v) for v in value)
    return False


@given(encodable | json_like)
def test_encode_frozen_agrees_with_the_plain_encoder_and_decoder(value: Any) -> None:
    """Text exactly ``dumps_js``'s pure-Python reference, copy exactly ``loads_exact`` of
    it (frozen, detached); ``None`` exactly for what c_safe refuses or a wider int."""
    got = speedups.encode_frozen(value, True)
    text_only = speedups.encode_frozen(value, False)
    if not jsoncodec._py_c_safe(value) or not _fits(value) or _holds_pair(value):
        assert got is None and text_only is None  # a raw pair: the Python path merges it
        return
    text, copy = got
    assert text == text_only == jsoncodec._dumps_js_exact(value)
    assert jsoncodec.dumps_js(value) == text
    assert same(copy, jsoncodec.loads_exact(text))
    if isinstance(value, (dict, list, tuple)):
        assert copy is not value


def test_encode_frozen_copies_deeply_and_freezes() -> None:
    inner = {"b": [1, {"c": "x"}]}
    value = {"a": inner, "t": (1, 2)}
    text, copy = speedups.encode_frozen(value, True)
    assert text == '{"a":{"b":[1,{"c":"x"}]},"t":[1,2]}'
    inner["b"].append(3)  # the caller's value changes afterwards
    assert copy == {"a": {"b": [1, {"c": "x"}]}, "t": [1, 2]}
    assert type(copy["a"]["b"]) is FrozenList and type(copy["t"]) is FrozenList
    with pytest.raises(TypeError, match="immutable"):
        copy["a"]["b"][1]["c"] = "y"


def test_encode_frozen_stops_at_c_safes_depth() -> None:
    for depth in (63, 64, 65):
        value: Any = 1
        for _ in range(depth):
            value = {"k": value}
        got = speedups.encode_frozen(value, False)
        assert (got is None) is (not jsoncodec._py_c_safe(value)), depth
        if got is not None:
            assert got == jsoncodec._dumps_js_exact(value)
    cycle: list[Any] = []
    cycle.append(cycle)
    assert speedups.encode_frozen(cycle, True) is None


# ------------------------------------------------------------------------- build_events


@given(
    st.integers(0, 2**62),
    st.lists(
        st.tuples(
            st.text(max_size=3),
            st.dictionaries(st.text(max_size=2), encodable, max_size=2),
            st.sampled_from([None, "append", Replace(1, 2)]),
            st.sampled_from([None, (), (0, 3)]),
            st.integers(0, 2**40),
        ),
        max_size=5,
    ),
)
def test_build_events_agrees(first: int, items: list[Any]) -> None:
    batch = [
        ValidatedEvent(type_, data, "", op, seqs, time) for type_, data, op, seqs, time in items
    ]
    got = build_events(first, batch)
    want = _py_build_events(first, batch)
    assert got == want
    assert [
        Event(first + i, *fields)
        for i, fields in enumerate(
            (v.type, v.time, v.data, v.surface_op, v.source_event_seqs) for v in batch
        )
    ] == got
    for g, w in zip(got, want, strict=True):
        assert type(g) is Event
        assert all(getattr(g, f) is getattr(w, f) for f in ("type", "data", "surface_op", "time"))


def test_build_events_is_the_c_version_and_checks_its_arguments() -> None:
    assert log._c_build_events is speedups.build_events
    with pytest.raises(TypeError, match="ValidatedEvent"):
        build_events(0, [("not", "six")])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="six slot"):
        speedups.build_events(Event, (), 0, [])


@given(
    st.text(st.characters(codec=None, exclude_categories=()))
    | st.sampled_from(
        ["", "é" * 70, "中" * 63 + "\ud800", "🚀" * 65 + "\udfff", "\ue000\ud7ff" * 40]
    )
)
def test_has_surrogate_agrees_with_the_pure_python_scan(text: str) -> None:
    from core import surrogates

    assert speedups.has_surrogate(text) is surrogates._py_has_surrogate(text)
