"""Packs with chunk runs (issue 15): a streamed reply's text chunks are stored as their
texts with the skeleton once per run, yet every event reads back byte for byte, packs of
the layout before still read (and are laid out anew when extended), paced appends write
the very packs one batch writes, damage is a ``StoreError`` naming the file, and the
packs are smaller than the layout without runs."""

from __future__ import annotations

import json
import random
import sqlite3
import zlib
from pathlib import Path
from typing import Any

import pytest

from core.errors import StoreError
from core.jsoncodec import dumps_js
from core.log import Event, NewEvent
from core.surrogates import merge_surrogate_pairs
from stores import MemorySessionStore, SqliteSessionStore
from stores import sqlite as sqlite_store
from stores.sqlite import KIND_PACK
from tests.benchmarks.bench_storage import make_turn
from tests.core.test_speedups_reads import same

CHUNK = "assistant/chunk"
TEXTS = ["ick b", 'a"\\', "\ud800", "\u2028", "\x00\x1f", "中文", "😀", ""]


def stream(turn: int, start: int, count: int, time: int = 100) -> list[NewEvent]:
    """A reply's text chunks as the engine writes them."""
    return [
        NewEvent(
            CHUNK,
            {
                "turn": turn,
                "step": 0,
                "chunk": {"type": "text-delta", "index": i, "text": TEXTS[i % len(TEXTS)]},
            },
            time=time + i,
        )
        for i in range(start, start + count)
    ]


def turn_end(turn: int) -> NewEvent:
    return NewEvent("turn/end", {"turn": turn, "status": "completed"}, time=999)


def packs(path: Path, session: str | None = None) -> list[tuple[int, int, bytes]]:
    """The ``(seq, n, data)`` of the packs (of one session), in order."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT s.id, e.seq, e.n, e.data FROM events AS e JOIN sessions AS s "
            "ON s.key = e.session WHERE e.kind = ? ORDER BY e.session, e.seq",
            (KIND_PACK,),
        ).fetchall()
    return [(seq, n, data) for sid, seq, n, data in rows if session in (None, sid.decode())]


def store_damaged(db_path: Path, body: bytes, damage: Any) -> bytes:
    """Store ``damage(body)`` (it must change it) as the database's one pack; it."""
    damaged = damage(body)
    assert damaged != body
    with sqlite3.connect(db_path) as conn:
        conn.execute(
            "UPDATE events SET data = ? WHERE kind = ?", (zlib.compress(damaged), KIND_PACK)
        )
    return damaged


def header(blob: bytes) -> list[Any]:
    return json.loads(zlib.decompress(blob).split(b"\n", 1)[0])  # type: ignore[no-any-return]


def texts(events: list[Event]) -> list[tuple[int, str, int, str]]:
    return [(e.seq, e.type, e.time, dumps_js(e.data)) for e in events]


async def test_paced_and_batch_replies_write_the_same_packs(db_path: Path) -> None:
    reply = [*stream(3, 0, 150), turn_end(3), *stream(4, 0, 40)]
    memory = MemorySessionStore()
    async with await SqliteSessionStore.open(db_path) as store:
        for s in (store, memory):
            await s.create_session("batch", created_at=1)
            await s.create_session("paced", created_at=1)
            await s.append_batch("batch", reply)
            rng = random.Random(15)
            at = 0
            while at < len(reply):
                step = rng.randint(1, 12)
                await s.append_batch("paced", reply[at : at + step])
                at += step
        for sid in ("batch", "paced"):
            assert texts(await store.read_events(sid)) == texts(await memory.read_events(sid))
    batch, paced = packs(db_path, "batch"), packs(db_path, "paced")
    assert batch == paced
    assert header(batch[0][2])[3] == [[0, 150, 3, 0, 0], [151, 40, 4, 0, 0]]


async def test_a_pack_of_the_layout_before_reads_back_and_is_laid_out_anew_when_extended(
    db_path: Path,
) -> None:
    first = [*stream(1, 0, 30), turn_end(1)]
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        await store.append_batch("s", first[:-1])
        want = await store.read_events("s")
    # Rewrite the pack as a release before chunk runs wrote it.
    old = sqlite_store._pack_blob(
        [e.type for e in want], [e.time for e in want], [dumps_js(e.data) for e in want], []
    )
    assert len(header(old)) == 3
    with sqlite3.connect(db_path) as conn:
        conn.execute("UPDATE events SET data = ? WHERE kind = ?", (old, KIND_PACK))
    async with await SqliteSessionStore.open(db_path) as store:
        assert texts(await store.read_events("s")) == texts(want)
        assert same(await store.read_events_at("s", [29, 3, 0]), [want[29], want[3], want[0]])
        assert sqlite_store._pack_types(old) == [CHUNK]
        assert await store.read_unknown_events("s") == []
        more = await store.append_batch("s", [*stream(1, 30, 5), turn_end(1)])
        got = await store.read_events("s")
        assert texts(got) == texts([*want, *more])
    ((seq, n, blob),) = packs(db_path)
    assert (seq, n) == (0, 36)
    assert blob == sqlite_store._pack(
        [e.type for e in got], [e.time for e in got], [dumps_js(e.data) for e in got]
    )
    assert header(blob)[3] == [[0, 35, 1, 0, 0]]


def damage_run(body: bytes) -> bytes:
    head, rest = body.split(b"\n", 1)
    return head.replace(b"[[0,30,", b"[[0,31,") + b"\n" + rest


@pytest.mark.parametrize(
    "damage",
    [
        damage_run,  # a run past the pack's lines
        lambda body: body.replace(b"[[0,30,7,0,0]]", b"[[0,30,7,0,0.5]]"),  # not an int
        lambda body: body.replace(b"[[0,30,7,0,0]]", b"[[0,30,7,0]]"),  # a field missing
        lambda body: body.replace(b"\nick b\n", b'\nick" b\n', 1),  # broken JSON once rebuilt
        lambda body: body.replace(b"\nick b\n", b"\nick \xff\n", 1),  # not UTF-8
        lambda body: body.replace(b"\nick b\n", b"\n", 1),  # an event missing
        lambda body: body.replace(b"\nick b\n", b"\nick b\nick b\n", 1),  # one too many
    ],
)
async def test_a_damaged_chunk_run_is_a_store_error_naming_the_file(
    db_path: Path, damage: Any
) -> None:
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        await store.append_batch("s", stream(7, 0, 30))
    ((_seq, _n, blob),) = packs(db_path)
    body = zlib.decompress(blob)
    assert body.startswith(b'[["assistant/chunk"],0,[100,') and b"[[0,30,7,0,0]]" in body
    damaged = store_damaged(db_path, body, damage)
    async with await SqliteSessionStore.open(db_path) as store:
        with pytest.raises(StoreError, match=str(db_path)):
            await store.read_events("s")
        with pytest.raises(StoreError, match=str(db_path)):
            await store.read_events_at("s", range(0, 30))  # every event: all decoded
        with pytest.raises(StoreError, match=str(db_path)):
            await store.read_events_at("s", [0])
        if damage is damage_run:  # the pack's structure is broken: extending it fails
            with pytest.raises(StoreError, match=str(db_path)):
                await store.append_batch("s", stream(7, 30, 2))
            assert len(packs(db_path)) == 1 and packs(db_path)[0][2] == zlib.compress(damaged)


async def benchmark_pack_sizes(db_path: Path, layout: Any) -> tuple[int, int]:
    """The bytes of the packs a few turns of the storage benchmark's workload are stored
    in, and of the same runs of events laid out by ``layout(types, times, datas)``."""
    rng = random.Random(15)
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        for t in range(1, 9):
            turn = make_turn(rng, t, 1_764_000_000_000 + t * 60_000)
            await store.append_batch("s", [turn.user])
            await store.append_batch("s", [*turn.chunks, *turn.tail])
        events = await store.read_events("s")
    stored = packs(db_path)
    assert len(stored) == 8
    new = old = 0
    for seq, n, blob in stored:
        run = events[seq : seq + n]
        new += len(blob)
        old += len(
            layout([e.type for e in run], [e.time for e in run], [dumps_js(e.data) for e in run])
        )
    return new, old


async def test_chunk_runs_make_the_packs_of_a_reply_smaller(db_path: Path) -> None:
    """On the storage benchmark's workload (a few turns of it), the packs are at most
    two thirds of the layout without runs (about 0.56 on this workload)."""
    new, old = await benchmark_pack_sizes(
        db_path, lambda types, times, datas: sqlite_store._pack_blob(types, times, datas, [])
    )
    assert new < old * 2 / 3, (new, old)


ODD_TYPES = ["\ude00\ud83d", "\ud83d\ude00", "😀", "\udc80", "é", "\x00", 'a"b\\', "\u2028"]


async def test_pack_types_holding_surrogates_read_back_as_they_went_in(tmp_path: Path) -> None:
    """A pack's types are in its header: two lone surrogates in a row stay two, an astral
    character stays one (the header was written by ``json.dumps``, which escapes both
    alike, and read by ``json.loads``, which merged the pair: found by the hypothesis test
    of chunk runs), in a batch, when extended by later appends, and through every read.
    (A high then a low surrogate given is the astral character: SPEC 4.1.)"""
    path = tmp_path / "types.sqlite3"
    batch = [NewEvent(t, {"i": i}, time=i) for i, t in enumerate(ODD_TYPES)]
    async with await SqliteSessionStore.open(path) as store:
        await store.create_session("s")
        await store.append_batch("s", batch[:3])
        await store.append_batch("s", [*stream(1, 0, 3), *batch[3:]])  # extends the pack
        events = await store.read_events("s")
        at = await store.read_events_at("s", [e.seq for e in events][::-1])
        unknown = await store.read_unknown_events("s")
    assert len(packs(path)) == 1
    wanted = [merge_surrogate_pairs(t) for t in [*ODD_TYPES[:3], *[CHUNK] * 3, *ODD_TYPES[3:]]]
    assert [e.type for e in events] == wanted
    assert [e.type for e in at] == wanted[::-1]
    assert [e.type for e in unknown] == [t for t in wanted if t != CHUNK]
    for pure in (sqlite_store._py_unpack_events,):
        seq, n, blob = packs(path)[0]
        assert [e.type for e in pure(seq, n, blob)] == wanted
    assert sqlite_store._pack_types(packs(path)[0][2]) == list(dict.fromkeys(wanted))


def test_a_header_of_three_written_before_v7_reads_as_it_always_did() -> None:
    """A pack of schema v6 with a non-ASCII type: ``json.dumps`` escaped it (an astral
    character as a surrogate pair), and it reads back as v6 read it."""
    header = json.dumps([["😀"], 0, [5]], separators=(",", ":"))
    blob = zlib.compress((header + "\n{}").encode("utf-8"))
    (event,) = sqlite_store._py_unpack_events(0, 1, blob)
    assert event.type == "😀"
    assert sqlite_store._unpack_events(0, 1, blob)[0].type == "😀"
    assert sqlite_store._pack_types(blob) == ["😀"]
