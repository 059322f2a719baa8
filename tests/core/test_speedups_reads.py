"""The C read path of ``core/_speedups.c`` (issue 15) against the Python path it speeds up.

``loads_frozen`` must give exactly ``loads_exact``'s frozen value (types included, escaped
surrogate pairs unmerged), and ``unpack_events`` exactly ``stores.sqlite``'s Python
decoding of a pack, or decline (``ValueError``): the callers then take the Python path, so
a read's value, or its error, is the same either way.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import jsoncodec
from core.jsoncodec import FrozenDict, FrozenList, dumps_js, loads_exact
from stores import sqlite as sqlite_store
from tests.core.speedups_reads_helpers import (
    check_damaged_pack,
    check_pack,
    hostile_text,
    json_values,
    outcome,
    packs,
    same,
    same_outcome,
    speedups,
    wanted_of,
)

# JSON text the store never writes: every spelling of the same values, escapes of every
# kind (escaped surrogate pairs among them), and broken text.
tokens = st.sampled_from(
    [
        "{", "}", "[", "]", ",", ":", '"', "\\", "\\u", "\\ud83d", "\\ude00", "\\uD83D",
        "\\n", "\\/", "\\x", "0", "-", "1", "9", "e", "E", "+", ".", "00", "true", "false",
        "null", "nul", "NaN", "Infinity", " ", "\t", "\r", "\n", "\x01", "é", "\ud800", "a",
        '"a"', '"k":', "1e400", "-0", "0.5", "9" * 30,
    ]
)  # fmt: skip


def texts_of(value: Any) -> list[str]:
    """Several spellings of one JSON value (the store's, escaped, spaced)."""
    out = [dumps_js(value)]
    try:
        out.append(json.dumps(value))  # ASCII: every non-ASCII character escaped
        out.append(json.dumps(value, indent=1, ensure_ascii=False))
        out.append(" " + json.dumps(value, separators=(" , ", " : ")) + "\r\n")
    except (UnicodeEncodeError, ValueError):
        pass
    return out


def python_loads(text: str) -> tuple[str, Any]:
    """``loads_exact`` as it was before the C decoder (its reference)."""
    saved = jsoncodec._loads_frozen
    jsoncodec._loads_frozen = None
    try:
        return outcome(lambda: loads_exact(text))
    finally:
        jsoncodec._loads_frozen = saved


def check_loads(text: str) -> None:
    want = python_loads(text)
    assert same_outcome(outcome(lambda: loads_exact(text)), want)
    fast = outcome(lambda: speedups.loads_frozen(text))
    if fast[0] == "value":
        assert same_outcome(fast, want), (text, fast, want)
    else:
        assert issubclass(fast[1], ValueError)  # declined: the caller takes the Python path
    raw = text.encode("utf-8", "surrogatepass")
    fast_bytes = outcome(lambda: speedups.loads_frozen(raw))
    if fast_bytes[0] == "value":  # only ever for what decodes, as the store's reads do
        assert same_outcome(fast_bytes, python_loads(raw.decode("utf-8"))), text
    else:
        assert issubclass(fast_bytes[1], ValueError)


def test_the_c_read_path_is_in_use() -> None:
    assert jsoncodec._loads_frozen is speedups.loads_frozen
    assert sqlite_store._C_UNPACK_EVENTS is speedups.unpack_events
    assert sqlite_store._C_UNLINK_RUNS is speedups.unlink_runs


@given(json_values)
def test_loads_frozen_is_loads_exact_on_what_the_store_writes(value: Any) -> None:
    for text in texts_of(value):
        check_loads(text)
    got = speedups.loads_frozen(dumps_js(value))  # never declined: the store's own text
    assert same(got, python_loads(dumps_js(value))[1])
    assert all(type(x) in (FrozenDict, FrozenList) for x in containers(got))


def containers(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [value, *(c for v in value.values() for c in containers(v))]
    if isinstance(value, list):
        return [value, *(c for v in value for c in containers(v))]
    return []


@given(st.lists(tokens | hostile_text, max_size=12).map("".join))
def test_loads_frozen_agrees_on_hostile_text(text: str) -> None:
    check_loads(text)


def test_loads_frozen_on_the_edges() -> None:
    for text in [
        '"\\ud83d\\ude00"',  # an escaped pair: two lone surrogates, never merged
        '["\\ud83d\\ude00", {"\\ud83d\\ude00": "\\uDE00\\uD83D"}]',
        '"\\u0000\\u001f\\"\\\\\\/\\b\\f\\n\\r\\t"',
        '"\ud800"',  # a raw lone surrogate in the str
        "1e400", "-1e400", "-0", "-0.0", "0.1", "1E+2", "1e-7", "123456789012345678",
        "1234567890123456789", "-9223372036854775808", "9" * 4300, "9" * 4301,
        "[" * 300 + "]" * 300, '{"a":1,"a":2}', '{"a":[1,{"b":[]}]}', "[]", "{}",
        "NaN", "[1,]", '{"a":1,}', "01", "1.", ".5", "-", '"\x01"', '"a', "", " ", "[1 2]",
        "\ufeff1", "truex", "nulll",
    ]:  # fmt: skip
        check_loads(text)


# ------------------------------------------------------------------------------ packs


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_unpack_events_is_the_python_decoding(data: st.DataObject) -> None:
    first, n, blob = data.draw(packs())
    check_pack(first, n, blob, None)
    check_pack(first, n, blob, data.draw(st.composite(lambda d: wanted_of(d, first, n))()))


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_unpack_events_agrees_on_damaged_packs(data: st.DataObject) -> None:
    first, n, blob = data.draw(packs())
    check_damaged_pack(data, first, n, blob)


def test_unpack_events_on_hand_made_headers() -> None:
    line = b'{"a":1}'
    for header in [
        b'[["t"],0,[5]]', b'[["t"],false,[5]]', b'[["t"],0.0,[5]]', b'[["t"],[0],[5]]',
        b'[["t"],[-1],[5]]', b'[["t"],[1],[5]]', b'[["t","u"],[1],[5]]', b'[["t"],0,[5.0]]',
        b'[["t"],0,[9223372036854775808]]', b'[["\\u0074"],0,[5]]', b'[[1],0,[5]]',
        b'[[],0,[5]]', b'[["t"],0,[5],1]', b'{"t":0}', b'[["t"],0,[]]', b'[["t"],0,[5,6]]',
        b' [ ["t"] , 0 , [5] ] ', b'[["\xc3\xa9"],0,[5]]', b'[["\\ud83d\\ude00"],0,[5]]',
    ]:  # fmt: skip
        blob = zlib.compress(header + b"\n" + line)
        for wanted in (None, {7}, {8}, [7]):
            check_pack(7, 1, blob, wanted)
