"""The C read path of ``core/_speedups.c`` (issue 15) against the Python path it speeds up.

``loads_frozen`` must give exactly ``loads_exact``'s frozen value (types included, escaped
surrogate pairs unmerged), and ``unpack_events`` exactly ``stores.sqlite``'s Python
decoding of a pack, or decline (``ValueError``): the callers then take the Python path, so
a read's value, or its error, is the same either way.
"""

from __future__ import annotations

import importlib
import json
import math
import zlib
from collections.abc import Callable, Container
from itertools import pairwise
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import jsoncodec
from core.jsoncodec import FrozenDict, FrozenList, dumps_js, loads_exact
from core.log import Event
from core.surrogates import merge_surrogate_pairs
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


# ------------------------------------------------------------------ chunk runs (packs)

CHUNK_PREFIX = '{"turn":'


def chunk_text(turn: Any, step: Any, index: Any, text: str) -> str:
    return dumps_js(
        {"turn": turn, "step": step, "chunk": {"type": "text-delta", "index": index, "text": text}}
    )


small_ints = st.integers(min_value=-3, max_value=3) | st.sampled_from(
    [10**17, 10**18 - 1, 10**18, -(10**18) + 1, 2**63 - 1, -(2**63), 10**30]
)


@st.composite
def chunk_datas(draw: st.DrawFn) -> list[str]:
    """Data JSON texts of a streamed reply and its neighbours: runs of text chunks (turn
    and step changing now and then, gaps and repeats in the index, hostile texts) mixed
    with other lines, near misses among them (other chunk types, extra keys, a float
    index, keys in another order)."""
    n = draw(st.integers(min_value=1, max_value=14))
    turn, step, index = draw(small_ints), draw(small_ints), draw(small_ints)
    out: list[str] = []
    for _ in range(n):
        kind = draw(st.sampled_from(["next"] * 6 + ["gap", "turn", "step", "other", "near"]))
        if kind == "gap":
            index += draw(st.sampled_from([-1, 0, 2, 10**18]))
        elif kind == "turn":
            turn = draw(small_ints)
        elif kind == "step":
            step = draw(small_ints)
        if kind == "other":
            out.append(dumps_js(draw(json_values | st.just({"turn": turn, "status": "completed"}))))
            continue
        text = draw(hostile_text)
        if kind == "near":
            out.append(
                draw(
                    st.sampled_from(
                        [
                            dumps_js(
                                {
                                    "turn": turn,
                                    "step": step,
                                    "chunk": {
                                        "type": "reasoning-delta",
                                        "index": index,
                                        "text": text,
                                    },
                                }
                            ),
                            dumps_js(
                                {
                                    "turn": turn,
                                    "step": step,
                                    "chunk": {
                                        "type": "text-delta",
                                        "index": index,
                                        "text": text,
                                        "x": 1,
                                    },
                                }
                            ),
                            dumps_js(
                                {
                                    "turn": turn,
                                    "step": step,
                                    "chunk": {
                                        "type": "text-delta",
                                        "index": index + 0.5,
                                        "text": text,
                                    },
                                }
                            ),
                            dumps_js(
                                {
                                    "step": step,
                                    "turn": turn,
                                    "chunk": {"type": "text-delta", "index": index, "text": text},
                                }
                            ),
                            dumps_js(
                                {
                                    "turn": turn,
                                    "step": step,
                                    "chunk": {"type": "text-delta", "index": index, "text": [text]},
                                }
                            ),
                            dumps_js(
                                {
                                    "turn": True,
                                    "step": step,
                                    "chunk": {"type": "text-delta", "index": index, "text": text},
                                }
                            ),
                        ]
                    )
                )
            )
        else:
            out.append(chunk_text(turn, step, index, text))
        index += 1
    return out


@st.composite
def chunk_packs(draw: st.DrawFn) -> tuple[int, int, bytes, list[str], list[str], list[int]]:
    datas = draw(chunk_datas())
    n = len(datas)
    # types as the store writes them (validated: a surrogate pair is its character)
    types = [merge_surrogate_pairs(t) for t in draw(st.lists(event_types, min_size=n, max_size=n))]
    if draw(st.booleans()):
        types = ["assistant/chunk"] * n
    times = [draw(st.integers(min_value=0, max_value=2**45))]
    for _ in range(n - 1):
        times.append(times[-1] + draw(deltas))
    first = draw(st.integers(min_value=0, max_value=2**62))
    return first, n, sqlite_store._pack(types, times, datas), datas, types, times


def old_pack(types: list[str], times: list[int], datas: list[str]) -> bytes:
    """The pack layout before chunk runs: every line its event's data JSON text."""
    return sqlite_store._pack_blob(types, times, list(datas), [])


def test_a_reply_s_chunks_are_stored_as_one_run() -> None:
    datas = [
        chunk_text(12, 0, 57 + i, t) for i, t in enumerate(["ick b", 'a"\\', "\ud800", "\u2028"])
    ]
    datas.append(dumps_js({"turn": 12, "status": "completed"}))
    body = zlib.decompress(
        sqlite_store._pack(["assistant/chunk"] * 4 + ["turn/end"], [1, 2, 3, 4, 5], datas)
    )
    assert body.decode("utf-8").split("\n") == [
        '[["assistant/chunk","turn/end"],[0,0,0,0,1],[1,1,1,1,1],[[0,4,12,0,57]]]',
        "ick b",
        'a\\"\\\\',
        "\\ud800",
        "\u2028",
        '{"turn":12,"status":"completed"}',
    ]
    assert sqlite_store._pack_types(sqlite_store._pack(["t"] * 5, [1] * 5, datas)) == ["t"]


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(chunk_packs(), st.data())
def test_chunk_runs_read_back_as_the_very_texts_written(
    pack: tuple[int, int, bytes, list[str], list[str], list[int]], data: st.DataObject
) -> None:
    """Both readers give back every event as written: its data's JSON text, type and
    time, and the very values the layout without runs gives."""
    first, n, blob, datas, types, times = pack
    readers = [sqlite_store._py_unpack_events, sqlite_store._unpack_events]
    if plain(types, times):
        readers.append(c_unpack)
    for unpack in readers:
        events = unpack(first, n, blob, None)
        assert [(e.seq, e.type, e.time, dumps_js(e.data)) for e in events] == [
            (first + i, types[i], times[i], datas[i]) for i in range(n)
        ]
        old = sqlite_store._py_unpack_events(first, n, old_pack(types, times, datas))
        assert same(events, old)
    assert set(sqlite_store._pack_types(blob)) == set(types)
    wanted = data.draw(st.composite(lambda d: wanted_of(d, first, n))())
    check_pack(first, n, blob, wanted)
    assert same(
        sqlite_store._unpack_events(first, n, blob, wanted),
        sqlite_store._py_unpack_events(first, n, old_pack(types, times, datas), wanted),
    )


def plain(types: list[str], times: list[int]) -> bool:
    """Whether the C reader takes a pack of these types and times (their header has no
    escape, every time and difference fits 64 bits): then it must never decline."""
    limit = 2**63
    return all(
        t.isascii() and t.isprintable() and '"' not in t and "\\" not in t for t in types
    ) and all(-limit <= x < limit for x in [*times, *(b - a for a, b in pairwise(times))])


def c_unpack(first: int, n: int, blob: bytes, wanted: Container[int] | None) -> list[Event]:
    """The C reader alone: it must take every pack the store writes (never decline)."""
    return speedups.unpack_events(first, n, zlib.decompress(blob), wanted)  # type: ignore[no-any-return]


@given(chunk_datas(), st.data())
def test_adding_texts_in_pieces_lays_them_out_as_one_batch(
    datas: list[str], data: st.DataObject
) -> None:
    lines: list[str] = []
    runs: list[list[int]] = []
    sqlite_store._add_lines(lines, runs, datas)
    assert sqlite_store._text_size(lines, runs) == len("\n".join(datas))
    cut = sorted(data.draw(st.lists(st.integers(0, len(datas)), max_size=3)))
    piece_lines: list[str] = []
    piece_runs: list[list[int]] = []
    for a, b in pairwise([0, *cut, len(datas)]):
        sqlite_store._add_lines(piece_lines, piece_runs, datas[a:b])
    assert (piece_lines, piece_runs) == (lines, runs)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_unpack_events_agrees_on_damaged_chunk_runs(data: st.DataObject) -> None:
    first, n, blob, *_ = data.draw(chunk_packs())
    check_damaged_pack(data, first, n, blob)


def test_unpack_events_on_hand_made_chunk_runs() -> None:
    lines = b"a\nb\n" + b'{"a":1}'
    for runs in [
        b"[[0,2,1,0,5]]", b"[[0,1,1,0,5],[1,1,1,0,5]]", b"[]", b"[[0,3,1,0,5]]",
        b"[[0,2,1,0,-1]]", b"[[1,2,1,0,5]]", b"[[2,1,1,0,5]]", b"[[0,0,1,0,5]]",
        b"[[-1,2,1,0,5]]", b"[[1,1,1,0,5],[0,1,1,0,5]]", b"[[0,2,1,0,5],[1,1,1,0,5]]",
        b"[[0,2,1,0]]", b"[[0,2,1,0,5,6]]", b"[[0,2,true,0,5]]", b"[[0,2,1.0,0,5]]",
        b"[[0,2,1,0,9223372036854775807]]", b"[[0,2,1,0,9223372036854775806]]",
        b"[[0,2,-9223372036854775808,-9223372036854775808,-9223372036854775808]]",
        b"[[0,2,1,0,9223372036854775808]]", b"[[0,2,1,0,100000000000000000000]]",
        b"[[0,3,1,0,5]]", b"{}", b"0", b"[0,2,1,0,5]", b"[[0,2,1,0,5]],[]",
    ]:  # fmt: skip
        blob = zlib.compress(b'[["t"],0,[5,1,1],' + runs + b"]\n" + lines)
        for n in (2, 3, 4):
            for wanted in (None, {7}, {8}, {9}, [7, 9]):
                check_pack(7, n, blob, wanted)


# ---------------------------------------------------------------- linked runs (packs)

# What escapes differently, or fools a split of the escaped texts joined: astral
# characters (one code point, two UTF-16 units), lone surrogates, control characters,
# CJK, quotes, backslashes, a quote then a comma.
LINKED_PIECES = [
    '",', '","', "\\", '"', ",", "😀", "\ud83d", "\ude00", "\x00", "\x1f", "\x7f", "中文", "</",
    "\u2028", "é", "\n", "\t", " ",
]  # fmt: skip
linked_text = st.lists(st.sampled_from(LINKED_PIECES) | any_text, max_size=4).map("".join)


def reply_data(turn: int, step: int, blocks: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "turn": turn,
        "step": step,
        "message": {"content": [{"type": kind, "text": text} for kind, text in blocks]},
    }


def reply_texts(replies: dict[int, dict[str, Any]]) -> sqlite_store._ReplyTexts:
    """The store's reader of replies over these messages (by seq) instead of a session."""
    kind, message = sqlite_store.KIND_SURFACE, sqlite_store._ASSISTANT_MESSAGE_TYPE
    return sqlite_store._ReplyTexts(
        lambda seq: (kind, message, dumps_js(replies[seq])) if seq in replies else None
    )


@st.composite
def linked_packs(
    draw: st.DrawFn,
) -> tuple[int, int, bytes, list[str], dict[int, dict[str, Any]]]:
    """A pack whose text runs the store linked to the replies after it (``_link_runs``):
    replies whose text is the runs' texts with text around them, in a block among
    others; other lines around the runs; some runs left text runs (their reply differs).
    Its first seq, count, blob, data JSON texts and the replies by seq."""
    first = draw(st.integers(min_value=0, max_value=2**40))
    datas: list[str] = []
    replies: dict[int, dict[str, Any]] = {}
    for turn in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            datas.append(dumps_js(draw(json_values)))
        pieces = draw(st.lists(linked_text, min_size=1, max_size=10))
        index = draw(st.integers(0, 5))
        datas += [chunk_text(turn, 0, index + k, t) for k, t in enumerate(pieces)]
        text = draw(linked_text) + "".join(pieces) + draw(linked_text)
        if draw(st.integers(0, 5)) == 0:
            text = text.replace("".join(pieces), "") + "?"  # not its chunks: no link
        blocks = [("text", text)]
        if draw(st.booleans()):
            blocks.insert(0, ("reasoning", draw(linked_text)))
        # as the store holds a reply: validated, so a surrogate pair is its character
        # (SPEC §4.1) and chunks holding its two halves apart are not its text
        replies[turn] = loads_exact(dumps_js(reply_data(turn, 0, blocks)), frozen=False)
    if draw(st.booleans()):
        datas.append(dumps_js({"turn": 0, "status": "completed"}))
    n = len(datas)
    times = list(range(1000, 1000 + n))
    draft = sqlite_store._PackDraft(first, ["assistant/chunk"] * n, times)
    sqlite_store._add_lines(draft.lines, draft.runs, datas)
    by_seq = {first + n + turn: data for turn, data in replies.items()}
    sqlite_store._link_runs([draft], list(by_seq.items()))
    return first, n, draft.blob(), datas, by_seq


def check_unlink(
    body: bytes, first: int, wanted: Container[int] | None, replies: dict[int, Any] | None
) -> tuple[str, Any]:
    """The C unlinking of a pack gives the Python one's very bytes, or declines; its
    outcome (the Python one's)."""

    def texts() -> sqlite_store._ReplyTexts | None:
        return None if replies is None else reply_texts(replies)

    want = outcome(lambda: sqlite_store._unlink_runs(body, first, wanted, texts()))
    fast = outcome(lambda: speedups.unlink_runs(body, first, wanted, texts()))
    if fast[0] == "value":
        assert fast == want, (body, fast, want)
    else:
        assert issubclass(fast[1], ValueError)
    assert outcome(lambda: sqlite_store._unlinked(body, first, wanted, texts())) == want
    return want


def check_linked_pack(
    first: int, n: int, blob: bytes, wanted: Container[int] | None, replies: dict[int, Any]
) -> None:
    """Both readers of a pack with linked runs agree: its events, or their error."""
    want = outcome(
        lambda: sqlite_store._py_unpack_events(first, n, blob, wanted, reply_texts(replies))
    )
    got = outcome(lambda: sqlite_store._unpack_events(first, n, blob, wanted, reply_texts(replies)))
    assert same_outcome(got, want), (got, want)


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(linked_packs(), st.data())
def test_unlink_runs_is_the_python_unlinking(
    pack: tuple[int, int, bytes, list[str], dict[int, dict[str, Any]]], data: st.DataObject
) -> None:
    """On the packs the store links the C version never declines: the Python version's
    bytes, whose events are the very texts written (wanted ones: the texts of runs with
    no seq wanted are not looked at, so not fetched)."""
    first, n, blob, datas, replies = pack
    body = zlib.decompress(blob)
    wanted = data.draw(st.composite(lambda d: wanted_of(d, first, n))())
    for seqs in (None, wanted):
        kind, unlinked = check_unlink(body, first, seqs, replies)
        assert kind == "value"
        events = sqlite_store._py_unpack_body(first, n, unlinked, seqs)
        assert [dumps_js(e.data) for e in events] == [
            datas[i] for i in range(n) if seqs is None or first + i in seqs
        ]
        check_linked_pack(first, n, blob, seqs, replies)
    linked = [run for run in header_of(body)[3] if len(run) == 9]
    if linked and wanted is not None:
        unseen = {seq for run in linked for seq in range(first + run[0], first + sum(run[:2]))}
        if not unseen & {s for s in range(first, first + n) if s in wanted}:
            assert check_unlink(body, first, wanted, None)[0] == "value"  # no reply read


def header_of(body: bytes) -> Any:
    return json.loads(body.split(b"\n", 1)[0])


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(linked_packs(), st.data())
def test_unlink_runs_agrees_on_damaged_links(
    pack: tuple[int, int, bytes, list[str], dict[int, dict[str, Any]]], data: st.DataObject
) -> None:
    """A linked run changed (each of its fields, its lengths, its reply's text) or bytes
    of the pack changed: the same bytes or the same error on both paths."""
    first, n, blob, _datas, replies = pack
    body = zlib.decompress(blob)
    head, *lines = body.split(b"\n")
    fields = header_of(body)
    linked = [r for r, run in enumerate(fields[3]) if len(run) == 9]
    damage = data.draw(st.sampled_from(["field", "length", "reply", "bytes"]))
    if damage == "field" and linked:
        run = fields[3][data.draw(st.sampled_from(linked))]
        at = data.draw(st.integers(0, 9))
        value = data.draw(
            st.sampled_from([-1, 0, 1, 2, n, n + 1, 2**63, True, 1.0, "1", None])
            | st.integers(-3, 3).map(lambda d, v=run[at % 9]: v + d)
        )
        if at == 9:
            run.append(value)
        else:
            run[at] = value
        head = dumps_js(fields).encode()
    elif damage == "length" and linked:
        run = fields[3][data.draw(st.sampled_from(linked))]
        k = run[0] + data.draw(st.integers(0, run[1] - 1))
        lines[k] = data.draw(
            st.sampled_from([b"", b"-1", b"-0", b" 1", b"01", b"1.0", b"1e1", b"x", b"[1]"])
            | st.sampled_from([b"1,2", b"99999999999999999999", b"true", b'"1"', b"\xff"])
            | st.integers(0, 40).map(lambda v: str(v).encode())
        )
    elif damage == "reply":
        seq = data.draw(st.sampled_from(sorted(replies)))
        content = replies[seq]["message"]["content"]
        block = data.draw(st.integers(0, len(content) - 1))
        content[block] = data.draw(
            st.sampled_from(
                [
                    {"type": "text", "text": content[block]["text"][1:]},
                    {"type": "text", "text": content[block]["text"] + "x"},
                    {"type": "text", "text": "x" + content[block]["text"]},
                    {"type": "reasoning", "text": content[block]["text"]},
                    {"type": "text", "text": 5},
                    {"type": "text"},
                ]
            )
        )
        if data.draw(st.integers(0, 5)) == 0:
            del replies[seq]
    else:
        damaged = bytearray(body)
        for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
            at = data.draw(st.integers(min_value=0, max_value=len(damaged) - 1))
            damaged[at] = data.draw(
                st.sampled_from(b'\n\\"{}[],:0-9 \x01\x80\xc3\xa9\xed\xa0\xff')
                | st.integers(0, 255)
            )
        head, *lines = bytes(damaged).split(b"\n")
    body = b"\n".join([head, *lines])
    wanted = data.draw(st.composite(lambda d: wanted_of(d, first, n))())
    check_unlink(body, first, wanted, replies)
    check_unlink(body, first, wanted, None)
    blob = zlib.compress(body)
    for count in (n, n + data.draw(st.sampled_from([-1, 1]))):
        check_linked_pack(first, count, blob, wanted, replies)


def test_unlink_runs_on_hand_made_links() -> None:
    """Damage the store-level tests name one by one, and what the C version declines."""
    replies = {9: reply_data(1, 0, [("reasoning", "r"), ("text", 'ab"c\ud83d😀')])}
    lines = b"2\n2\n2"  # 'ab', '"c', then the surrogate and the astral character
    for run in [
        b"[0,3,1,0,0,9,1,0,12]", b"[0,3,1,0,0,9,1,0,13]", b"[0,3,1,0,0,9,1,1,12]",
        b"[0,3,1,0,0,8,1,0,12]", b"[0,3,1,0,0,9,0,0,12]", b"[0,3,1,0,0,9,2,0,12]",
        b"[0,3,1,0,0,9,1,-1,12]", b"[0,3,1,0,0,9,1,0]", b"[0,3,1,0,0,9,1,0,true]",
        b"[0,4,1,0,0,9,1,0,12]", b"[1,2,1,0,0,9,1,0,12]", b"[0,0,1,0,0,9,1,0,12]",
        b"[-1,3,1,0,0,9,1,0,12]", b"[0,2,1,0,0,9,1,0,5],[1,2,1,0,0,9,1,2,10],[2,1,1,0,2,9,1,4,7]",
        b"[0,3,1,0,0,9,1,0,12],[0,3,1,0,0]", b"[0,2,1,0,0,9,1,0,5],[2,1,1,0,2,9,1,4,7]", b"[0,3,1,0,0,9,1,0,12],7", b"[0,3,1,0,0,9,1,0,12.0]",
        b"[0,3,1,0,0,9,1,0,9223372036854775808]", b"[0,3,1,0,0,9223372036854775807,1,0,12]",
    ]:  # fmt: skip
        for head in [b'[["t"],0,[5,1,1],[' + run + b"]]", b'[["t"] ,0,[5,1,1],[' + run + b"]]"]:
            for body in [head + b"\n" + lines, head + b"\n" + lines.replace(b"2\n2", b"2\n02")]:
                for wanted in (None, {7}, {8}, {9}, [7, 9], set()):
                    check_unlink(body, 7, wanted, replies)
                    check_unlink(body, 7, wanted, None)
                    for n in (2, 3, 4):
                        check_linked_pack(7, n, zlib.compress(body), wanted, replies)
    run = b"[0,3,1,0,0,9,1,0,12]"
    for head in [
        b'[["t"],0,[5,1,1],[' + run + b"]]", b'[["t"],0,[5,1,1],[' + run + b",[3,1,1,0,3]]]",
        b'[["t"],0,[5,1,1],[' + run + b",[3,1,1,0]]]", b'[["t"],0,[5,1,1],[' + run + b",[3,1,1,0,3,4]]]",
        b'[["t"],0,[5,1,1],[' + run + b",]]", b'[["t"],0,[5,1,1],[' + run + b"],[]]",
        b'[["t"],0,[5,1,1],[' + run + b"]] ", b' [["t"],0,[5,1,1],[' + run + b"]]",
        b'[["t","u"],[0,1,0],[5,1,1],[' + run + b"]]", b'[[],0,[5,1,1],[' + run + b"]]",
        b'[["\xc3\xa9\xe2\x80\xa8\x7f"],0,[5,1,1],[' + run + b"]]",
        b'[["\x01"],0,[5,1,1],[' + run + b"]]", b'[["\xed\xa0\x80"],0,[5,1,1],[' + run + b"]]",
        b'[["\xff"],0,[5,1,1],[' + run + b"]]", b'[["\xff"],0,[5,1,1],[[0,3,1,0,0]]]',
        b'[["t"],0,[5,-0,1],[' + run + b"]]", b'[["t"],0,[5,01,1],[' + run + b"]]",
        b'[["t"],0,[5,1.0,1],[' + run + b"]]", b'[["t"],-0,[5,1,1],[' + run + b"]]",
        b'[["t"],0,[1234567890123456789,1,1],[' + run + b"]]", b'[["t"],0,[],[' + run + b"]]",
        b'[["t"],0,[5,1,1],[[0,3,1,0,0,9,1,0,012]]]', b'[["t"],0,[5,1,1],[[0,3,-0,0,0,9,1,0,12]]]',
        b'[["t"],0,[5,1,1],[[0,3,1,0,0,9,1,0,1e1]]]', b'[["t"],0,[5,1,1],[[0,3,1,0,0,9,1,0,12]]',
        b'[["t"],0,[5,1,1],[[0,3,1,0,0,9,1,0,12]]]]', b'[["t"];0,[5,1,1],[' + run + b"]]",
        b'["t",0,[5,1,1],[' + run + b"]]", b'[["t"],0,[5,1,1],[' + run + b"],7]",
    ]:  # fmt: skip
        for wanted in (None, {7}, {9}):
            body = head + b"\n" + lines
            check_unlink(body, 7, wanted, replies)
            check_linked_pack(7, 3, zlib.compress(body), wanted, replies)
    for head in [  # as the encoder writes them: taken
        b'[["t"],0,[5,1,1],[' + run + b",[3,1,1,0,3]]]", b'[[],0,[],[[0,1,2,3,4],' + run + b"]]",
        b'[["t","u"],[0,1,0],[5,-1,1],[' + run + b"]]", b'[["\xc3\xa9\xe2\x80\xa8"],0,[5],[' + run + b"]]",
    ]:  # fmt: skip
        speedups.unlink_runs(head + b"\n" + lines, 7, None, reply_texts(replies))
    body = b'[["t"],0,[5,1,1],[[0,3,1,0,0,9,1,0,12]]]\n' + lines
    assert check_unlink(body, 7, None, replies) == (
        "value",
        b'[["t"],0,[5,1,1],[[0,3,1,0,0]]]\nab\n\\"c\n\\ud83d\xf0\x9f\x98\x80',
    )
