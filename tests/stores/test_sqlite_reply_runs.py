"""Chunk runs that point at their reply (issue 15): once a batch appends an
``assistant/message``, a text run of its turn and step whose texts joined are exactly a
part of one of its text blocks stores only the texts' lengths, and every read rebuilds
the texts from the message, byte for byte; anything else stays a text run. Damaged
links are a ``StoreError`` naming the file; packs of both earlier layouts still read."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import StoreError
from core.jsoncodec import dumps_js
from core.log import Event, NewEvent
from stores import MemorySessionStore, SqliteSessionStore
from stores import sqlite as sqlite_store
from stores.sqlite import KIND_PACK
from tests.benchmarks.bench_storage import make_turn
from tests.stores.test_sqlite_chunk_runs import (
    benchmark_pack_sizes,
    header,
    packs,
    store_damaged,
)

CHUNK = "assistant/chunk"
MESSAGE = "assistant/message"
HOSTILE = [
    "ick b", 'a"\\', "\ud83d", "\ude00", "\ud800", "\u2028", "\x00\x1f", "中文", "😀", "", '",',
    "\\", ",",
]  # fmt: skip


def chunk(turn: int, step: int, index: int, text: str, kind: str = "text-delta") -> NewEvent:
    return NewEvent(
        CHUNK,
        {"turn": turn, "step": step, "chunk": {"type": kind, "index": index, "text": text}},
        time=1000 + index,
    )


def message(turn: int, step: int, *blocks: tuple[str, str]) -> NewEvent:
    content = [{"type": kind, "text": text} for kind, text in blocks]
    return NewEvent(
        MESSAGE,
        {
            "turn": turn,
            "step": step,
            "message": {
                "id": f"m{turn}.{step}",
                "role": "assistant",
                "content": content,
                "source": {"kind": "model", "provider": "p", "model": "m"},
            },
        },
        surface_op="append",
        time=5000,
    )


def turn_end(turn: int) -> NewEvent:
    return NewEvent("turn/end", {"turn": turn, "status": "completed"}, time=9000)


def reply(turn: int, texts: list[str], step: int = 0) -> list[NewEvent]:
    """A reply as the engine writes it: its text chunks, its message, its turn end."""
    chunks = [chunk(turn, step, i, t) for i, t in enumerate(texts)]
    return [*chunks, message(turn, step, ("text", "".join(texts))), turn_end(turn)]


def texts(events: list[Event]) -> list[tuple[int, str, int, str, str]]:
    """Each event as text: what "byte for byte" compares (surface ops included)."""
    return [(e.seq, e.type, e.time, dumps_js(e.data), repr(e.surface_op)) for e in events]


@contextmanager
def python_path(on: bool) -> Iterator[None]:
    """The Python decoding of packs (and unlinking of their runs) instead of the C one,
    when ``on``."""
    saved = sqlite_store.packs._C_UNPACK_EVENTS, sqlite_store.packs._C_UNLINK_RUNS
    if on:
        sqlite_store.packs._C_UNPACK_EVENTS = sqlite_store.packs._C_UNLINK_RUNS = None
    try:
        yield
    finally:
        sqlite_store.packs._C_UNPACK_EVENTS, sqlite_store.packs._C_UNLINK_RUNS = saved


# --------------------------------------------------------------------- random replies

hostile = st.lists(
    st.sampled_from(HOSTILE) | st.text(st.characters(blacklist_categories=()), max_size=4),
    max_size=3,
).map("".join)


@st.composite
def sessions(draw: st.DrawFn) -> list[NewEvent]:
    """A log of replies: reasoning and text chunks (gaps in index, empty texts, surrogate
    halves split across chunks), several steps, messages whose text is or is not the
    chunks' text, unknown events between them, now and then a reply of over 512 chunks."""
    events: list[NewEvent] = []
    for number in range(1, draw(st.integers(1, 3)) + 1):
        turn = draw(st.sampled_from([number, -number, 10**17 + number]))
        events.append(
            NewEvent(
                "user/message",
                {"id": f"u{number}", "role": "user", "content": [], "source": {"kind": "user"}},
                surface_op="append",
                time=10,
            )
        )
        for step in range(draw(st.integers(1, 2))):
            index = draw(st.integers(0, 3))
            parts: dict[str, list[str]] = {"text": [], "reasoning": []}
            long = draw(st.integers(0, 9)) == 0
            count = draw(st.integers(520, 700)) if long else draw(st.integers(0, 14))
            for _ in range(count):
                kind = draw(st.sampled_from(["text", "text", "text", "reasoning"]))
                # (a low then a high: no surrogate pair across the joins, SPEC 4.1)
                text = "x\ude00" if long else draw(hostile)
                if long and _ % 3 == 1:
                    text = "\ud83d"
                parts[kind].append(text)
                events.append(chunk(turn, step, index, text, f"{kind}-delta"))
                index += draw(st.sampled_from([1, 1, 1, 2]))  # gaps in index
                if draw(st.integers(0, 30)) == 0:
                    events.append(NewEvent("x/unknown", {"turn": turn, "k": text}, time=20))
            text = "".join(parts["text"])
            shape = draw(st.sampled_from(["same", "same", "prefixed", "other", "split"]))
            if shape == "prefixed":
                text = draw(hostile) + text + draw(hostile)
            elif shape == "other" and text:
                text = text[:-1] + ("y" if text[-1] != "y" else "z")
            blocks: list[tuple[str, str]] = []
            if parts["reasoning"]:
                blocks.append(("reasoning", "".join(parts["reasoning"])))
            if shape == "split":  # the text in two blocks
                cut = draw(st.integers(0, len(text)))
                blocks += [("text", text[:cut]), ("text", text[cut:])]
            else:
                blocks.append(("text", text))
            events.append(message(turn, step, *blocks))
        events.append(turn_end(turn))
    return events


def batches(rng: random.Random, events: list[NewEvent], paced: bool) -> list[list[NewEvent]]:
    if not paced:
        return [events]
    out: list[list[NewEvent]] = []
    at = 0
    while at < len(events):
        step = rng.choice([1, 1, 2, 3, 7, 40])
        out.append(events[at : at + step])
        at += step
    return out


async def check_session(path: Path, events: list[NewEvent], seed: int, paced: bool) -> None:
    rng = random.Random(seed)
    memory = MemorySessionStore()
    async with await SqliteSessionStore.open(path) as store:
        for s in (store, memory):
            await s.create_session("s", created_at=1)
        for batch in batches(rng, events, paced):
            for s in (store, memory):
                await s.append_batch("s", batch)
        want = await memory.read_events("s")
        n = len(want)
        chunk_seqs = [e.seq for e in want if e.type == CHUNK]
        subsets = [
            chunk_seqs,
            rng.sample(chunk_seqs, min(len(chunk_seqs), rng.randint(1, 5))),
            rng.sample(range(n), rng.randint(1, n)),
            list(range(max(0, n - 50), n)),
        ]
        for on in (False, True):
            with python_path(on):
                assert texts(await store.read_events("s")) == texts(want)
                for seqs in subsets:
                    got = await store.read_events_at("s", seqs)
                    assert texts(got) == texts(await memory.read_events_at("s", seqs))
                    bodies = await store.read_bodies_at("s", seqs)
                    assert [(t, dumps_js(d)) for t, d in bodies] == [
                        (t, dumps_js(d)) for t, d in await memory.read_bodies_at("s", seqs)
                    ]
                after = rng.randint(-1, n)
                assert texts(await store.read_unknown_events("s", after)) == texts(
                    await memory.read_unknown_events("s", after)
                )


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(sessions(), st.integers(0, 2**32), st.booleans())
def test_replies_read_back_as_appended(events: list[NewEvent], seed: int, paced: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(check_session(Path(folder) / "dsh.sqlite3", events, seed, paced))


# --------------------------------------------------------------------- the layout


async def test_a_reply_s_run_points_at_its_message(db_path: Path) -> None:
    parts = ["He", "llo \ude00", '\ud83d "q" \\ \u2028 \x00', "", "end"]
    reasoning = chunk(1, 0, 5, "think", "reasoning-delta")
    events = [
        *[chunk(1, 0, i, t) for i, t in enumerate(parts)],
        reasoning,
        chunk(1, 0, 6, "!"),
        message(1, 0, ("reasoning", "think"), ("text", "".join(parts) + "!")),
        turn_end(1),
    ]
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        written = await store.append_batch("s", events)
        assert texts(await store.read_events("s")) == texts(written)
        assert texts(await store.read_events_at("s", [1, 2, 6])) == texts(
            [written[1], written[2], written[6]]
        )
    ((seq, n, blob),) = packs(db_path)
    assert (seq, n) == (0, 7)
    chars = sum(len(dumps_js(t)) - 2 for t in parts)
    after = len("".join(parts))
    assert header(blob)[3] == [[0, 5, 1, 0, 0, 7, 1, 0, chars], [6, 1, 1, 0, 6, 7, 1, after, 1]]
    assert zlib.decompress(blob).split(b"\n")[1:] == [
        b"2",
        b"5",
        b"11",
        b"0",
        b"3",
        dumps_js(reasoning.data).encode(),
        b"1",
    ]


@pytest.mark.parametrize(
    "parts",
    [
        ['{"a": "b",', '"c": 1}'],  # a text ending in '",' escapes to '\\",'
        ['",', "x"],
        ['",', '",', '","'],
        ["\\", "y"],  # one ending in an escaped backslash, before a quote
        ["\\", '"', ","],
    ],
)
async def test_texts_ending_in_a_quote_and_a_comma_read_back(
    db_path: Path, parts: list[str]
) -> None:
    """The escaped texts of a run joined end to end hold '","' inside a text too (an
    escaped quote, then a comma): the read still finds each text's own."""
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        written = await store.append_batch("s", reply(1, parts))
        for on in (False, True):
            with python_path(on):
                assert texts(await store.read_events("s")) == texts(written)
                assert texts(await store.read_events_at("s", [1])) == texts([written[1]])
    ((_seq, _n, blob),) = packs(db_path)
    assert [len(run) for run in header(blob)[3]] == [9]


async def test_a_whole_read_decodes_each_reply_once_from_its_own_rows(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read holds the reply's row already (after the packs pointing at it): it is
    not fetched again, and decoded once for the runs' texts and the event both."""
    parts = ["ab", '",', "\ud83d", "😀" * 300]  # a message stored compressed
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        written = await store.append_batch("s", [*reply(1, parts), *reply(2, ["x", "y"])])
        fetched: list[int] = []
        decoded: list[str] = []
        loads = sqlite_store.packs.loads_exact

        def fetch(seq: int) -> None:
            fetched.append(seq)

        def counting_loads(text: str, **options: Any) -> Any:
            decoded.append(text)
            return loads(text, **options)

        monkeypatch.setattr(
            sqlite_store._ReplyTexts, "of", classmethod(lambda cls, raw, key: cls(fetch))
        )
        monkeypatch.setattr(sqlite_store.packs, "loads_exact", counting_loads)
        monkeypatch.setattr(sqlite_store.reads, "loads_exact", counting_loads)
        for on in (False, True):
            with python_path(on):
                fetched.clear()
                decoded.clear()
                assert texts(await store.read_events("s")) == texts(written)
                assert fetched == []
                for message_event in (e for e in written if e.type == MESSAGE):
                    assert decoded.count(dumps_js(message_event.data)) == 1


async def test_a_message_that_is_not_its_chunks_leaves_them_text_runs(db_path: Path) -> None:
    events = [*reply(1, ["ab", "cd"])[:2], message(1, 0, ("text", "abXcd")), turn_end(1)]
    events += [*reply(2, ["ab", "cd"])[:2], message(2, 1, ("text", "abcd")), turn_end(2)]
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        written = await store.append_batch("s", events)
        assert texts(await store.read_events("s")) == texts(written)
    assert [header(blob)[3] for _seq, _n, blob in packs(db_path)] == [
        [[0, 2, 1, 0, 0]],
        [[1, 2, 2, 0, 0]],  # after the first turn's end
    ]


async def test_paced_and_batch_replies_write_the_same_packs(db_path: Path) -> None:
    rng = random.Random(15)
    log: list[NewEvent] = []
    for t in range(1, 4):
        turn = make_turn(rng, t, 1_764_000_000_000 + t * 60_000)
        log += [turn.user, *turn.chunks, *turn.tail]
    async with await SqliteSessionStore.open(db_path) as store:
        for sid in ("batch", "paced"):
            await store.create_session(sid, created_at=1)
        await store.append_batch("batch", log)
        for batch in batches(random.Random(3), log, paced=True):
            await store.append_batch("paced", batch)
        assert texts(await store.read_events("paced")) == texts(await store.read_events("batch"))
    batch, paced = packs(db_path, "batch"), packs(db_path, "paced")
    assert batch == paced
    assert all(len(run) == 9 for _s, _n, blob in batch for run in header(blob)[3])


async def test_a_reply_over_several_packs_points_at_its_message_from_each(
    db_path: Path,
) -> None:
    """In one batch or streamed in many, every pack of the reply points at its message
    (the packs filled before the open one are rewritten too): the same packs."""
    parts = [f"w{i % 7}\ude00" if i % 2 else "\ud83d" for i in range(1300)]
    events = reply(1, parts)
    async with await SqliteSessionStore.open(db_path) as store:
        for sid in ("batch", "paced"):
            await store.create_session(sid, created_at=1)
        written = await store.append_batch("batch", events)
        for batch in batches(random.Random(5), events, paced=True):
            await store.append_batch("paced", batch)
        for sid in ("batch", "paced"):
            assert texts(await store.read_events(sid)) == texts(written)
            chunks = list(range(0, 1300, 3))
            got = await store.read_events_at(sid, chunks)
            assert texts(got) == texts([written[i] for i in chunks])
    batch = [[len(run) for run in header(blob)[3]] for _s, _n, blob in packs(db_path, "batch")]
    paced = [[len(run) for run in header(blob)[3]] for _s, _n, blob in packs(db_path, "paced")]
    assert batch == paced == [[9], [9], [9]]
    assert packs(db_path, "batch") == packs(db_path, "paced")


async def test_linked_runs_make_the_benchmark_s_packs_smaller(db_path: Path) -> None:
    """On the storage benchmark's workload (a few turns of it) the packs are at most two
    thirds of the same packs with text runs (about a half here)."""
    new, old = await benchmark_pack_sizes(db_path, sqlite_store._pack)
    assert new < old * 2 / 3, (new, old)


# --------------------------------------------------------------------- damage

RUN = b"[[0,3,1,0,0,3,0,0,6]]"


def relink(run: bytes) -> Any:
    return lambda body: body.replace(RUN, run)


@pytest.mark.parametrize(
    "damage",
    [
        relink(b"[[0,3,1,0,0,99,0,0,6]]"),  # no such row
        relink(b"[[0,3,1,0,0,4,0,0,6]]"),  # the turn end: not a message
        relink(b"[[0,3,1,0,0,1,0,0,6]]"),  # a seq inside the pack: no row of its own
        relink(b"[[0,3,1,0,0,3,1,0,6]]"),  # no such block
        relink(b"[[0,3,1,0,0,3,0,1,6]]"),  # the lengths overrun the text
        relink(b"[[0,3,1,0,0,3,0,0,7]]"),  # not the size it says
        relink(b"[[0,3,1,0,0,3,0,-1,6]]"),  # a negative offset
        relink(b"[[0,3,1,0,0,3,0,0]]"),  # a field missing
        relink(b"[[0,3,1,0,0,3,0,0,true]]"),  # not an int
        lambda body: body.replace(b"\n3\n", b"\n9\n"),  # a length overruns
        lambda body: body.replace(b"\n3\n", b"\n03\n"),  # not a length
        lambda body: body.replace(b"\n3\n", b"\nx\n"),
    ],
)
async def test_a_damaged_link_is_a_store_error_naming_the_file(db_path: Path, damage: Any) -> None:
    events = reply(1, ["ab", "cde", "f"])
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        await store.append_batch("s", events)
    ((_seq, _n, blob),) = packs(db_path)
    body = zlib.decompress(blob)
    assert RUN in body and body.endswith(b"\n2\n3\n1"), body
    store_damaged(db_path, body, damage)
    async with await SqliteSessionStore.open(db_path) as store:
        for on in (False, True):
            with python_path(on):
                with pytest.raises(StoreError, match=str(db_path)):
                    await store.read_events("s")
                with pytest.raises(StoreError, match=str(db_path)):
                    await store.read_events_at("s", [1])
                with pytest.raises(StoreError, match=str(db_path)):
                    await store.read_events_at("s", [0, 1, 2, 3, 4])


async def test_a_link_reads_its_own_session_only(db_path: Path) -> None:
    """A run points at a seq of its own session: a message at that seq in another
    session is not read."""
    async with await SqliteSessionStore.open(db_path) as store:
        for sid in ("a", "b"):
            await store.create_session(sid, created_at=1)
        await store.append_batch("a", reply(1, ["ab", "cde", "f"]))
        await store.append_batch("b", [turn_end(1)] * 5 + [message(1, 0, ("text", "abcdef"))])
    ((_seq, _n, blob),) = packs(db_path, "a")
    body = zlib.decompress(blob).replace(b"[[0,3,1,0,0,3,", b"[[0,3,1,0,0,5,")
    assert b"[[0,3,1,0,0,5," in body
    with sqlite3.connect(db_path) as conn:
        conn.execute("UPDATE events SET data = ? WHERE kind = ?", (zlib.compress(body), KIND_PACK))
    async with await SqliteSessionStore.open(db_path) as store:
        with pytest.raises(StoreError, match=str(db_path)):
            await store.read_events("a")


# --------------------------------------------------------------------- earlier layouts


@pytest.mark.parametrize("layout", ["no runs", "text runs"])
async def test_packs_of_the_earlier_layouts_read_back_and_are_linked_when_extended(
    db_path: Path, layout: str
) -> None:
    parts = ["He", "llo \ude00", "\ud83d \u2028 \x00", "", '"\\']
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        head = await store.append_batch("s", reply(1, parts)[:-2])  # the chunks alone
    datas = [dumps_js(e.data) for e in head]
    types, times = [e.type for e in head], [e.time for e in head]
    if layout == "no runs":
        old = sqlite_store._pack_blob(types, times, datas, [])
        assert len(header(old)) == 3
    else:
        old = sqlite_store._pack(types, times, datas)
        assert all(len(run) == 5 for run in header(old)[3])
    with sqlite3.connect(db_path) as conn:
        conn.execute("UPDATE events SET data = ? WHERE kind = ?", (old, KIND_PACK))
    async with await SqliteSessionStore.open(db_path) as store:
        assert texts(await store.read_events("s")) == texts(head)
        tail = await store.append_batch("s", reply(1, parts)[-2:])  # the message, the end
        got = await store.read_events("s")
        assert texts(got) == texts([*head, *tail])
        assert texts(await store.read_events_at("s", [3, 1])) == texts([head[3], head[1]])
    ((_seq, n, blob),) = packs(db_path)
    assert n == len(parts)
    assert [len(run) for run in header(blob)[3]] == [9]


@pytest.mark.parametrize("turn", [-3, 0, 10**17])
async def test_a_reply_of_any_turn_links_and_reads_back(db_path: Path, turn: int) -> None:
    events = reply(turn, ["ab", "", "c"], step=-1)
    async with await SqliteSessionStore.open(db_path) as store:
        await store.create_session("s", created_at=1)
        written = await store.append_batch("s", events)
        for on in (False, True):
            with python_path(on):
                assert texts(await store.read_events("s")) == texts(written)
                assert texts(await store.read_events_at("s", [2])) == texts([written[2]])
    ((_seq, _n, blob),) = packs(db_path)
    assert header(blob)[3] == [[0, 3, turn, -1, 0, 3, 0, 0, 3]]
