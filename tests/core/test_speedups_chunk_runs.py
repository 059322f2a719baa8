"""The C read path of ``core/_speedups.c`` on chunk runs (a reply's chunks stored as one
run in a pack) against the Python decoding: the very texts written read back, damaged
runs read alike or declined."""

from __future__ import annotations

import zlib
from collections.abc import Container
from itertools import pairwise

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.jsoncodec import dumps_js
from core.log import Event
from core.surrogates import merge_surrogate_pairs
from stores import sqlite as sqlite_store
from tests.core.speedups_reads_helpers import (
    check_damaged_pack,
    check_pack,
    chunk_text,
    deltas,
    event_types,
    hostile_text,
    json_values,
    same,
    speedups,
    wanted_of,
)

# ------------------------------------------------------------------ chunk runs (packs)


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
