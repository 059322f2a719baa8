"""What the C read path's tests share (``test_speedups_reads``, ``_chunk_runs``,
``_linked_runs``): the extension, the value and pack strategies, exact comparison (types
included), and the checks of a pack read both ways."""

from __future__ import annotations

import importlib
import math
import zlib
from collections.abc import Callable, Container
from typing import Any

from hypothesis import strategies as st

from core.jsoncodec import dumps_js
from core.log import Event
from stores import sqlite as sqlite_store

speedups: Any = importlib.import_module("core._speedups")

# Every code point (lone surrogates included), and the pieces that break parsers.
any_text = st.text(st.characters(blacklist_categories=()), max_size=12)
hostile_text = st.lists(
    st.sampled_from(
        ["\ud83d", "\ude00", "😀", '"', "\\", "\x00", "\x1f", "\n", "\x7f", "é", "中", "\u2028"]
    )
    | any_text,
    max_size=6,
).map("".join)
atoms = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.sampled_from([0, -1, 2**63 - 1, -(2**63), 2**63, 10**18, 10**19, -(10**18)])
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0.0, -0.0, 1e300, 5e-324, 1.5, -2.25e-7, 1e21, 123456789.125])
    | hostile_text
)
json_values = st.recursive(
    atoms,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(hostile_text, inner, max_size=4),
    max_leaves=12,
)


def same(a: Any, b: Any) -> bool:
    """Equal, and of the very same types all the way down (floats by their bits)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return math.copysign(1, a) == math.copysign(1, b) and (a == b or (a != a and b != b))
    if isinstance(a, Event):
        return (
            (a.seq, a.type, a.time, a.surface_op, a.source_event_seqs)
            == (b.seq, b.type, b.time, b.surface_op, b.source_event_seqs)
            and type(a.time) is type(b.time)
            and same(a.data, b.data)
        )
    return bool(a == b)


def outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "value", call()
    except Exception as err:
        return "error", type(err)


def same_outcome(a: tuple[str, Any], b: tuple[str, Any]) -> bool:
    return a[0] == b[0] and (a[1] is b[1] if a[0] == "error" else same(a[1], b[1]))


event_types = st.sampled_from(["assistant/chunk", "turn/end", "x/y"]) | hostile_text.filter(bool)
deltas = st.integers(min_value=-(2**40), max_value=2**40) | st.sampled_from([0, 2**63, -(2**63)])


@st.composite
def packs(draw: st.DrawFn) -> tuple[int, int, bytes]:
    n = draw(st.integers(min_value=1, max_value=12))
    types = draw(st.lists(event_types, min_size=n, max_size=n))
    if draw(st.booleans()):
        types = [types[0]] * n
    times = [draw(st.integers(min_value=0, max_value=2**45))]
    for _ in range(n - 1):
        times.append(times[-1] + draw(deltas))
    datas = [dumps_js(draw(json_values)) for _ in range(n)]
    first = draw(st.integers(min_value=0, max_value=2**62))
    return first, n, sqlite_store._pack(types, times, datas)


def wanted_of(draw: st.DrawFn, first: int, n: int) -> Container[int] | None:
    kind = draw(st.sampled_from(["none", "set", "list", "odd"]))
    if kind == "none":
        return None
    seqs = draw(st.lists(st.integers(min_value=first - 2, max_value=first + n + 2), max_size=8))
    if kind == "set":
        return set(seqs)
    if kind == "list":
        return seqs
    # keys equal to ints that are not ints: ``in`` finds them all the same
    return {float(s) for s in seqs} | {True}


def check_pack(first: int, n: int, blob: bytes, wanted: Container[int] | None) -> None:
    want = outcome(lambda: sqlite_store._py_unpack_events(first, n, blob, wanted))
    assert same_outcome(outcome(lambda: sqlite_store._unpack_events(first, n, blob, wanted)), want)
    fast = outcome(lambda: speedups.unpack_events(first, n, zlib.decompress(blob), wanted))
    if fast[0] == "value":
        assert same_outcome(fast, want), (fast, want)
    else:
        assert issubclass(fast[1], ValueError)


def check_damaged_pack(data: st.DataObject, first: int, n: int, blob: bytes) -> None:
    """The pack with one to three of its inflated bytes changed reads alike on both
    paths (or the C one declines), for its count of events and one off it."""
    body = bytearray(zlib.decompress(blob))
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        at = data.draw(st.integers(min_value=0, max_value=len(body) - 1))
        body[at] = data.draw(
            st.sampled_from(b'\n\\"{}[],:0-e \x01\x80\xc3\xa9\xed\xa0\xf4\x90\xff')
            | st.integers(0, 255)
        )
    damaged = zlib.compress(bytes(body))
    wanted = data.draw(st.composite(lambda d: wanted_of(d, first, n))())
    check_pack(first, n, damaged, wanted)
    check_pack(first, n + data.draw(st.sampled_from([-1, 1])), damaged, wanted)


CHUNK_PREFIX = '{"turn":'


def chunk_text(turn: Any, step: Any, index: Any, text: str) -> str:
    return dumps_js(
        {"turn": turn, "step": step, "chunk": {"type": "text-delta", "index": index, "text": text}}
    )
