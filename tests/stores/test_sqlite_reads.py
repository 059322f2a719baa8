"""The SQLite store's fast reads (issue 15) return exactly what the plain reads do:
``read_events_at`` of a dense run of seqs (one range statement) against the memory store,
on random logs of packed and single rows; errors stay what they were."""

from __future__ import annotations

import asyncio
import sqlite3
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import InvalidEventError, SessionNotFoundError, StoreError
from core.log import NewEvent
from stores import MemorySessionStore, SqliteSessionStore
from stores.base import SessionStore
from stores.sqlite import KIND_PACK
from tests.core.test_speedups_reads import hostile_text, same

CHUNK = "assistant/chunk"


def chunk(i: int, text: str) -> NewEvent:
    return NewEvent(CHUNK, {"turn": 1, "chunk": {"index": i, "text": text}}, time=10 + i)


def streamed(turn: int, start: int, texts: list[str]) -> list[NewEvent]:
    """Text chunks as the engine streams them (stored as a chunk run of a pack)."""
    return [
        NewEvent(
            CHUNK,
            {
                "turn": turn,
                "step": 0,
                "chunk": {"type": "text-delta", "index": start + k, "text": t},
            },
            time=10 + k,
        )
        for k, t in enumerate(texts)
    ]


# A log as batches: runs of chunks (packed, streamed ones as chunk runs), turn ends
# (packable), surface messages and big payloads (single rows, compressed).
batch = (
    st.lists(
        st.one_of(
            st.builds(chunk, st.integers(0, 10**6), hostile_text).map(lambda e: [e]),
            st.builds(
                streamed, st.integers(0, 2), st.integers(0, 3), st.lists(hostile_text, max_size=8)
            ),
            st.builds(lambda t: [NewEvent("turn/end", {"t": t}, time=5)], hostile_text),
            st.builds(
                lambda t: [NewEvent("user/message", {"q": t}, "append", time=7)], hostile_text
            ),
            st.builds(
                lambda n: [NewEvent("tool/x", {"big": "é" * n}, time=8)], st.integers(0, 900)
            ),
        ),
        min_size=1,
        max_size=25,
    )
    .map(lambda parts: [e for part in parts for e in part])
    .filter(bool)
)


async def fill(store: SessionStore, batches: list[list[NewEvent]]) -> None:
    await store.create_session("s", created_at=1)
    for events in batches:
        await store.append_batch("s", events)


async def answer(store: SessionStore, seqs: list[int]) -> tuple[str, Any]:
    try:
        return "value", await store.read_events_at("s", seqs)
    except Exception as err:
        return "error", type(err)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(batch, min_size=1, max_size=6), data=st.data())
def test_read_events_at_is_the_plain_read(
    tmp_path_factory: Any, batches: list[list[NewEvent]], data: st.DataObject
) -> None:
    path: Path = tmp_path_factory.mktemp("reads") / "dsh.sqlite3"
    total = sum(len(b) for b in batches)
    # Dense runs (one range statement), sparse picks (a lookup per seq), duplicates, any
    # order, seqs past the end.
    start = data.draw(st.integers(0, total))
    picks = [
        list(range(start, min(start + data.draw(st.integers(1, 60)), total + 2))),
        data.draw(st.lists(st.integers(0, total + 1), max_size=20)),
        data.draw(st.permutations(range(max(0, total - 50), total))),
        [total - 1, total - 1, max(0, total - 2)],
    ]

    async def run() -> None:
        memory = MemorySessionStore()
        await fill(memory, batches)
        async with await SqliteSessionStore.open(path) as store:
            await fill(store, batches)
            assert same(await store.read_events("s"), await memory.read_events("s"))
            for seqs in picks:
                got, want = await answer(store, seqs), await answer(memory, seqs)
                assert got[0] == want[0]
                assert same(got[1], want[1]) if got[0] == "value" else got[1] is want[1]

    asyncio.run(run())


async def test_a_dense_read_checks_the_session_and_the_reader(db_path: Path) -> None:
    async with await SqliteSessionStore.open(db_path, user="ann") as store:
        await store.create_session("s", created_at=1)
        await store.append_batch("s", [chunk(i, "w") for i in range(30)])
        assert [e.seq for e in await store.read_events_at("s", range(25, 30))] == list(
            range(25, 30)
        )
        with pytest.raises(SessionNotFoundError):
            await store.read_events_at("nope", range(25, 30))
        with pytest.raises(InvalidEventError):
            await store.read_events_at("s", range(25, 31))  # 30 is not there
        with pytest.raises(InvalidEventError):
            await store.read_events_at("s", [-1])
    async with await SqliteSessionStore.open(db_path, user="bob") as other:
        with pytest.raises(SessionNotFoundError):  # not shared with bob: not there for him
            await other.read_events_at("s", range(25, 30))
        with pytest.raises(SessionNotFoundError):
            await other.read_events_at("s", [3, 900])  # the sparse path, too
    async with await SqliteSessionStore.open(db_path, user="ann") as store:
        await store.share("s", "bob")
    async with await SqliteSessionStore.open(db_path, user="bob") as other:
        assert len(await other.read_events_at("s", range(25, 30))) == 5


@pytest.mark.parametrize(
    "damage",
    [
        lambda body: body.replace(b'"text":', b'"text"', 1),  # broken JSON
        lambda body: body.replace(b"w2", b"w\xff", 1),  # not UTF-8
        lambda body: body.rsplit(b"\n", 1)[0],  # an event missing
        lambda body: body.replace(b"\n", b"\n\n", 1),  # an event too many
    ],
)
async def test_a_damaged_pack_is_a_store_error_naming_the_file(db_path: Path, damage: Any) -> None:
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        await store.append_batch("s", [chunk(i, f"w{i}") for i in range(30)])
    with sqlite3.connect(db_path) as conn:
        (blob,) = conn.execute("SELECT data FROM events WHERE kind = ?", (KIND_PACK,)).fetchone()
        damaged = zlib.compress(damage(zlib.decompress(blob)))
        conn.execute("UPDATE events SET data = ? WHERE kind = ?", (damaged, KIND_PACK))
    async with await SqliteSessionStore.open(db_path) as store:
        with pytest.raises(StoreError, match=str(db_path)):
            await store.read_events("s")
        with pytest.raises(StoreError, match=str(db_path)):
            await store.read_events_at("s", range(0, 30))  # every event: all decoded


async def test_a_cancelled_read_leaves_the_store_usable(db_path: Path) -> None:
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        await store.append_batch("s", [chunk(i, "w") for i in range(2000)])
        for k in range(20):
            reads = [asyncio.ensure_future(store.read_events("s")) for _ in range(3)]
            await asyncio.sleep(0)
            for task in reads[::2]:
                task.cancel()
            for task in reads:
                try:
                    assert len(await task) == 2000 + k
                except asyncio.CancelledError:
                    assert task.cancelled()
            await store.append("s", "turn/end", {"t": 1})
        assert len(await store.read_events("s")) == 2020
        assert len(await store.read_events_at("s", range(1990, 2020))) == 30
