"""The exact JSON codec: JavaScript-identical output and lossless Python round-trips."""

from __future__ import annotations

import copy
import json
import math
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.jsoncodec import (
    FrozenDict,
    FrozenList,
    _c_safe,
    _dumps_js_exact,
    dumps_js,
    freeze_json,
    loads_exact,
    thaw_json,
    utf8_len,
)
from core.surrogates import merge_json_pairs, merge_surrogate_pairs

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5)
    ),
    max_leaves=25,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.5e-7, "1.5e-7"),
        (1e-6, "0.000001"),
        (1e-7, "1e-7"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (123.456, "123.456"),
        (-0.0, "0"),
        (100.0, "100"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (-2.5e-8, "-2.5e-8"),
        (0.1, "0.1"),
    ],
)
def test_floats_format_like_javascript(value: float, expected: str) -> None:
    assert dumps_js(value) == expected


def test_strings_escape_like_json_stringify() -> None:
    text = 'a"b\\c\x00\x08\x0c\n\r\t\x1f\x7f é 😀 \u2028 <'
    assert dumps_js(text) == '"a\\"b\\\\c\\u0000\\b\\f\\n\\r\\t\\u001f\x7f é 😀 \u2028 <"'


def test_each_unpaired_surrogate_is_escaped_on_its_own_a_pair_is_its_character() -> None:
    # SPEC §4.1: a raw pair in a Python str is the astral character, as in JavaScript.
    assert dumps_js("\ud83d\ude00") == '"😀"'
    assert dumps_js({"k\ud83d\ude00": ["\ud83d\ude00", 1.5]}) == '{"k😀":["😀",1.5]}'
    assert dumps_js("x\udc00y\ud800") == '"x\\udc00y\\ud800"'
    assert dumps_js("\ude00\ud83d") == '"\\ude00\\ud83d"'  # low then high: no pair
    assert dumps_js("\ud83d\ud83d\ude00") == '"\\ud83d😀"'
    assert dumps_js("😀") == '"😀"'


@pytest.mark.parametrize(
    "text",
    [
        '"\\ud83d\\ude00"',
        '"\\uD83D\\uDE00"',
        '"\ud83d\\ude00"',
        '"\\ud83d\ude00"',
        '"\ud83d\ude00"',
    ],
)
@pytest.mark.parametrize(
    "kwargs", [{}, {"frozen": False}, {"unique_keys": True}], ids=["frozen", "plain", "unique"]
)
def test_a_pair_is_merged_on_decode_however_written(text: str, kwargs: dict[str, bool]) -> None:
    assert loads_exact(text, **kwargs) == "😀"
    assert loads_exact("{" + text + ":[" + text + "]}", **kwargs) == {"😀": ["😀"]}
    # a lone one stays, escaped or raw
    assert loads_exact('["\\ud83d", "\\ude00", "\udc00x"]', **kwargs) == [
        "\ud83d",
        "\ude00",
        "\udc00x",
    ]


@pytest.mark.parametrize(
    "bad",
    [math.nan, math.inf, -math.inf, object(), {1: "x"}, {"a": {1, 2}}, b"bytes"],
)
def test_non_json_values_raise_type_error(bad: object) -> None:
    with pytest.raises(TypeError):
        dumps_js(bad)


def test_cycles_raise_type_error() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(TypeError):
        dumps_js(loop)


def test_shared_but_acyclic_values_are_fine() -> None:
    shared = {"a": 1}
    assert dumps_js([shared, shared]) == '[{"a":1},{"a":1}]'


@given(json_values)
@settings(max_examples=300)
def test_round_trip_is_exact(value: object) -> None:
    text = dumps_js(value)
    assert loads_exact(text, frozen=False) == merge_json_pairs(value)
    assert loads_exact(text) == merge_json_pairs(value)
    # the output is valid UTF-8 even with lone surrogates in the input
    text.encode("utf-8")


@given(json_values)
@settings(max_examples=200)
def test_agrees_with_stock_encoder_when_no_floats_or_surrogates(value: object) -> None:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if any(0xD800 <= ord(c) <= 0xDFFF for c in text) or "." in text or "e" in text.lower():
        return
    assert dumps_js(value) == text


def test_slow_parser_rejects_what_json_rejects() -> None:
    pair = '"\ud83d\\ude00"'  # a raw surrogate: the slow parser
    for bad in [
        "[" + pair,
        "[" + pair + ",]",
        "{" + pair + "}",
        pair + " x",
        '["\ud83d\\ude00\\q"]',
        '["\ud83d\\ude00\x01"]',
        "[" + pair + ",01]",
    ]:
        with pytest.raises(json.JSONDecodeError):
            loads_exact(bad)


def test_slow_parser_reads_everything_json_does() -> None:
    text = '{ "a" : [1, -2.5e3, true, false, null, {"b": "\ud83d\\ude00\\n\\/\udc00"}] , "c":{} ,"d":[]}'
    assert loads_exact(text) == {
        "a": [1, -2500.0, True, False, None, {"b": "😀\n/\udc00"}],
        "c": {},
        "d": [],
    }


def test_frozen_values_are_immutable_and_equal_to_plain_ones() -> None:
    value = loads_exact('{"a":[1,{"b":[2]}]}')
    assert isinstance(value, FrozenDict)
    assert isinstance(value["a"], FrozenList)
    assert value == {"a": [1, {"b": [2]}]}
    with pytest.raises(TypeError):
        value["x"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        value["a"].append(3)
    with pytest.raises(TypeError):
        value["a"][1]["b"][0] = 5
    with pytest.raises(TypeError):
        value.update({"y": 2})
    thawed = thaw_json(value)
    thawed["a"][1]["b"].append(3)
    assert value["a"][1]["b"] == [2]
    assert copy.deepcopy(value) == value
    assert pickle.loads(pickle.dumps(value)) == value


def test_freeze_json_detaches() -> None:
    original = {"a": [1, 2]}
    frozen = freeze_json(original)
    original["a"].append(3)
    assert frozen == {"a": [1, 2]}


@given(st.text())
def test_utf8_len_counts_lone_surrogates_as_three(text: str) -> None:
    assert utf8_len(text) == len(text.encode("utf-8", "surrogatepass"))


def test_utf8_len_examples() -> None:
    assert utf8_len("") == 0
    assert utf8_len("abc") == 3
    assert utf8_len("é") == 2
    assert utf8_len("😀") == 4
    assert utf8_len("\ud83d") == 3
    assert utf8_len("\ud83d\ude00") == 6


# --------------------------------------------------------------------------- C fast path


# Values the fast path takes (no floats) as well as ones it must hand to the exact
# encoder: tuples, frozen containers, str/int subclasses, surrogates everywhere.
class _Str(str):
    pass


class _Int(int):
    pass


fast_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(alphabet=st.characters(codec=None))
    | st.text().map(_Str)
    | st.integers(-5, 5).map(_Int)
)
mixed_values = st.recursive(
    fast_scalars | json_scalars,
    lambda children: (
        st.lists(children, max_size=5)
        | st.lists(children, max_size=5).map(tuple)
        | st.lists(children, max_size=5).map(FrozenList)
        | st.dictionaries(st.text(), children, max_size=5)
        | st.dictionaries(st.text(), children, max_size=5).map(FrozenDict)
    ),
    max_leaves=30,
)


@settings(max_examples=400)
@given(mixed_values)
def test_fast_path_output_is_the_exact_encoders(value: object) -> None:
    assert dumps_js(value) == _dumps_js_exact(value)


@pytest.mark.parametrize(
    "value",
    [
        {"a": 1.0},  # floats are formatted like JS only by the exact encoder
        {"a": [0.1, 1e21]},
        {1: "non-str key"},
        {"k": {True: 1}},
        {"nan": math.nan},
        {"set": {1, 2}},
        {"bytes": b"x"},
    ],
)
def test_fast_path_declines_what_the_c_encoder_gets_wrong(value: object) -> None:
    try:
        expected: object = _dumps_js_exact(value)
    except TypeError as err:
        expected = TypeError(str(err))
    try:
        got: object = dumps_js(value)
    except TypeError as err:
        got = TypeError(str(err))
    assert repr(got) == repr(expected)
    assert not _c_safe(value, 0)


def test_fast_path_escapes_lone_surrogates_and_keeps_the_rest_raw() -> None:
    value = {"\ud800key": ["\udfff", "😀", "\ud83d\ude00", "\x00\x1f\x7f\u2028<>&"]}
    assert _c_safe(value, 0)
    assert dumps_js(value) == ('{"\\ud800key":["\\udfff","😀","😀","\\u0000\\u001f\x7f\u2028<>&"]}')


def test_cycles_and_deep_values_still_raise_type_error() -> None:
    cyclic: list[object] = []
    cyclic.append(cyclic)
    with pytest.raises(TypeError, match="circular"):
        dumps_js(cyclic)
    deep: object = "leaf"
    for _ in range(100):  # deeper than the fast path looks: handled by the exact encoder
        deep = {"d": [deep]}
    assert dumps_js(deep) == _dumps_js_exact(deep)


@pytest.mark.parametrize(
    "text",
    ['{"a":[1,{"b":2}]}', ' {"a":1}\n', "[1,[2]]", '"x"', "7", "\t[]", "null"],
)
@pytest.mark.parametrize("frozen", [True, False])
def test_loads_exact_reads_one_value_with_or_without_whitespace(text: str, frozen: bool) -> None:
    value = loads_exact(text, frozen=frozen)
    assert value == json.loads(text)

    def container_types(v: object) -> set[type]:
        if isinstance(v, dict):
            return {type(v)}.union(*(container_types(x) for x in v.values()))
        if isinstance(v, list):
            return {type(v)}.union(*(container_types(x) for x in v))
        return set()

    allowed = {FrozenDict, FrozenList} if frozen else {dict, list}
    assert container_types(value) <= allowed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Expecting value"),
        ("  ", "Expecting value"),
        ("tru", "Expecting value"),
        ('{"a":1}x', "Extra data"),
        ('{"a":1} {"b":2}', "Extra data"),
        ("1 2", "Extra data"),
        ("[1,2", "Expecting ',' delimiter"),
    ],
)
@pytest.mark.parametrize("frozen", [True, False])
def test_loads_exact_errors_match_json(text: str, message: str, frozen: bool) -> None:
    with pytest.raises(json.JSONDecodeError, match=message) as caught:
        loads_exact(text, frozen=frozen)
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    assert (caught.value.msg, caught.value.pos) == (expected.value.msg, expected.value.pos)


# Strings heavy in surrogates: raw pairs, reversed pairs, lone halves, astral characters.
_SURROGATE_TEXT = st.lists(
    st.sampled_from(["\ud83d", "\ude80", "\ud800", "\udfff", "\udbff", "\udc00", "🚀", "a", '"'])
    | st.characters(),
    max_size=12,
).map("".join)

_SHORT_ESCAPES = {0x22: '\\"', 0x5C: "\\\\", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t"}


def _js_stringify(text: str) -> str:
    """JSON.stringify of the JavaScript string whose UTF-16 code units are ``text``'s
    (an astral character as its two units): the ES2019 rules spelt out, unit by unit."""
    units: list[int] = []
    for ch in text:
        cp = ord(ch)
        if cp > 0xFFFF:
            units += [0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF)]
        else:
            units.append(cp)
    out = ['"']
    i = 0
    while i < len(units):
        u = units[i]
        nxt = units[i + 1] if i + 1 < len(units) else -1
        if 0xD800 <= u <= 0xDBFF and 0xDC00 <= nxt <= 0xDFFF:
            out.append(chr(0x10000 + ((u - 0xD800) << 10) + (nxt - 0xDC00)))
            i += 2
            continue
        if u in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[u])
        elif u < 0x20 or 0xD800 <= u <= 0xDFFF:
            out.append(f"\\u{u:04x}")
        else:
            out.append(chr(u))
        i += 1
    return "".join(out) + '"'


@given(_SURROGATE_TEXT)
@settings(max_examples=500)
def test_surrogates_decode_of_encode_is_the_merged_text(text: str) -> None:
    merged = merge_surrogate_pairs(text)
    encoded = dumps_js(text)
    assert encoded == _js_stringify(text)  # JSON.stringify of the same UTF-16 string
    assert dumps_js([text, {text: 1.5}]) == f"[{encoded},{{{encoded}:1.5}}]"  # exact path
    assert encoded.encode("utf-8")  # valid UTF-8: every surrogate left is escaped
    for kwargs in ({}, {"frozen": False}, {"unique_keys": True}):
        assert loads_exact(encoded, **kwargs) == merged  # type: ignore[arg-type]
        # as Python's json.dumps (ASCII-safe) writes it, each half of a pair escaped
        assert loads_exact(json.dumps(text), **kwargs) == merged  # type: ignore[arg-type]
        # the text raw in the JSON (a str holding surrogates, paired or not)
        raw = json.dumps(text, ensure_ascii=False)
        assert loads_exact(raw, **kwargs) == merged  # type: ignore[arg-type]
    # the stock decoder merges escaped pairs too: it agrees on what dsh writes
    assert json.loads(encoded) == merged
    assert merge_surrogate_pairs(merged) == merged  # only unpaired ones remain
