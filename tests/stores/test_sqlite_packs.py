"""The packed layout: runs of log events share a row, yet every event reads back exactly
and stays addressable by its seq (schema v3)."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from core.jsoncodec import dumps_js
from core.log import Event, NewEvent
from stores import MemorySessionStore, SqliteSessionStore
from stores.sqlite import KIND_PACK

MSG = "user/message"
CHUNK = "assistant/chunk"


def rows(path: Path) -> list[tuple[int, int, int, str]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT seq, n, kind, typeof(data) FROM events ORDER BY seq").fetchall()


def chunk(i: int, text: str = "w") -> NewEvent:
    return NewEvent(CHUNK, {"turn": 1, "chunk": {"index": i, "text": f"{text}{i}"}}, time=10 + i)


def same(a: list[Event], b: list[Event]) -> bool:
    return [
        (e.seq, e.type, e.time, dumps_js(e.data), e.surface_op, e.source_event_seqs) for e in a
    ] == [(e.seq, e.type, e.time, dumps_js(e.data), e.surface_op, e.source_event_seqs) for e in b]


async def test_a_paced_reply_fills_one_pack_and_reads_back_exactly(db_path: Path) -> None:
    memory = MemorySessionStore()
    async with await SqliteSessionStore.open(db_path) as store:
        for s in (store, memory):
            await s.create_session("s", created_at=1)
            await s.append("s", MSG, {"q": 1}, surface_op="append", time=5)
            for start in range(0, 40, 7):  # batches of 7, like a paced stream
                await s.append_batch("s", [chunk(i) for i in range(start, min(start + 7, 40))])
            await s.append_batch(
                "s",
                [
                    NewEvent("assistant/message", {"a": "x" * 600}, "append", time=99),
                    NewEvent("turn/end", {"t": 1}, time=99),
                ],
            )
        got, want = await store.read_events("s"), await memory.read_events("s")
        assert same(got, want)
        # Any seq, alone or in any order, packed or not.
        order = list(range(len(want)))
        random.Random(1).shuffle(order)
        assert same(await store.read_events_at("s", order), [want[i] for i in order])
        assert same(await store.read_events_at("s", [20]), [want[20]])
        bodies = await store.read_bodies_at("s", [*order, 20, 20, 1, 40])
        assert [(t, dumps_js(d)) for t, d in bodies] == [
            (want[i].type, dumps_js(want[i].data)) for i in [*order, 20, 20, 1, 40]
        ]
        assert (await store.read_last_event_times())["s"] == 99
    # One user message, the 40 chunks in one pack, the message compressed, the turn end.
    assert rows(db_path) == [
        (0, 1, 1, "text"),
        (1, 40, KIND_PACK, "blob"),
        (41, 1, 1, "blob"),
        (42, 1, 0, "text"),
    ]


async def test_packs_are_bounded_and_mixed_types_survive(db_path: Path) -> None:
    weird = "vendor/\udc80\x00type"
    batch = [
        NewEvent(
            weird if i % 3 == 0 else CHUNK, {"i": i, "s": "\ud83d\ude00中"}, time=5000 - i * (i % 4)
        )
        for i in range(1200)
    ]
    batch.insert(600, NewEvent("vendor/big", {"blob": "z" * 5000}, time=3))  # too large to pack
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        written = await store.append_batch("s", batch)
        got = await store.read_events("s")
        assert same(got, written)
        assert same(
            await store.read_events_at("s", [0, 511, 512, 600, 601, 1200]),
            [written[i] for i in (0, 511, 512, 600, 601, 1200)],
        )
        picked = (1200, 0, 511, 512, 600, 601, 1199, 700, 5)
        bodies = await store.read_bodies_at("s", picked)
        assert [(t, dumps_js(d)) for t, d in bodies] == [
            (written[i].type, dumps_js(written[i].data)) for i in picked
        ]
    layout = rows(db_path)
    assert [n for _, n, _, _ in layout] == [512, 88, 1, 512, 88]
    assert layout[2][2:] == (0, "blob")  # a large single event is compressed


async def test_a_title_and_a_surface_event_are_never_packed(db_path: Path) -> None:
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        await store.append_batch(
            "s",
            [
                chunk(0),
                chunk(1),
                NewEvent("session/title", {"title": "T"}),
                chunk(2),
                chunk(3),
                NewEvent(MSG, {"m": 1}, "append"),
            ],
        )
        assert (await store.read_titles())["s"].event_seq == 2
        assert await store.last_surface_seq("s") == 5
        _header, last, surface = await store.read_surface_events("s")
        assert (last, [e.seq for e in surface]) == (5, [5])
    assert [(seq, n, kind) for seq, n, kind, _ in rows(db_path)] == [
        (0, 2, KIND_PACK),
        (2, 1, 2),
        (3, 2, KIND_PACK),
        (5, 1, 1),
    ]
