"""Workload 6: the storage layout on the issue's workload, beside 1d17249's store.

20 sessions x 50 turns (UUID ids, turns interleaved across sessions); each turn a
~300-byte user message, 200 streamed text chunks of 1-8 characters (a quarter of the
turns in Chinese), the assistant message and a turn end: 203 events, so one session holds
10,150 events. Every event carries its own realistic time (chunks ~15 ms apart).

- *batch*: each reply (chunks, message, turn end) is appended in one ``append_batch``.
- *paced*: the reply is appended by the engine's flush rule (``CHUNK_FLUSH_SECONDS`` after
  the first pending chunk, or ``CHUNK_FLUSH_EVENTS``), simulated on a virtual clock with
  chunks arriving 5-25 ms apart, so the batches are what a real stream produces without
  the run taking real minutes.

Bytes per event are the database file's size after closing (WAL checkpointed) divided by
the events stored. Events/s count the reply batches' events over their append time (the
user messages, one ``append`` each, are timed apart). Reads are timed on the batch
database: ``read_events`` of a whole 10,150-event session, and ``read_events_at`` of its
last 50 seqs. Both ``synchronous`` levels are measured for appends (NORMAL is dsh's).
The baseline is 1d17249's ``SqliteSessionStore`` (schema v2) loaded from git.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.engine import CHUNK_FLUSH_EVENTS, CHUNK_FLUSH_SECONDS
from core.gcpause import gc_paused
from core.log import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    TURN_END,
    USER_MESSAGE,
    NewEvent,
    assistant_message,
    text_block,
    user_message,
)
from stores import SqliteSessionStore
from tests.benchmarks._common import Row, Settings, median, time_async
from tests.benchmarks._legacy import BASE_COMMIT, legacy_store_class

BASE_TIME = 1_764_000_000_000
CHUNKS_PER_TURN = 200
_WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "lazy",
    "dogs",
    "while",
    "the",
    "build",
    "runs",
    "and",
    "the",
    "release",
    "notes",
    "mention",
    "checkout",
    "billing",
    "search",
    "relevance",
    "latency",
    "budget",
    "deploy",
]
_HAN = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工"


@dataclass(frozen=True)
class Turn:
    user: NewEvent
    chunks: list[NewEvent]
    tail: list[NewEvent]
    gaps_ms: list[int]  # virtual arrival gap before each chunk (paced mode)


def _chunk_text(rng: random.Random, chinese: bool) -> str:
    size = rng.randint(1, 8)
    if chinese:
        return "".join(rng.choice(_HAN) for _ in range(size))
    text = ""
    while len(text) < size:
        text += rng.choice(_WORDS) + " "
    return text[:size]


def make_turn(rng: random.Random, turn: int, start: int) -> Turn:
    chinese = rng.random() < 0.25
    words: list[str] = []
    while len(" ".join(words)) < 300:
        words.append(rng.choice(_WORDS) if not chinese else "".join(rng.choices(_HAN, k=3)))
    user = NewEvent(
        USER_MESSAGE,
        user_message(" ".join(words)[:300], id=str(uuid.UUID(int=rng.getrandbits(128)))),
        "append",
        time=start,
    )
    now = start + 800
    chunks: list[NewEvent] = []
    gaps: list[int] = []
    parts: list[str] = []
    for index in range(CHUNKS_PER_TURN):
        gap = rng.randint(5, 25)
        now += gap
        gaps.append(gap)
        text = _chunk_text(rng, chinese)
        parts.append(text)
        chunk = {"type": "text-delta", "index": index, "text": text}
        chunks.append(
            NewEvent(ASSISTANT_CHUNK, {"turn": turn, "step": 0, "chunk": chunk}, time=now)
        )
    message = assistant_message(
        [text_block("".join(parts))],
        provider="deepseek",
        model="deepseek-chat",
        id=str(uuid.UUID(int=rng.getrandbits(128))),
    )
    data: dict[str, Any] = {
        "turn": turn,
        "step": 0,
        "message": message,
        "finish": "completed",
        "usage": {"prompt_tokens": 1200 + turn, "completion_tokens": 180},
    }
    tail = [
        NewEvent(ASSISTANT_MESSAGE, data, "append", time=now + 1),
        NewEvent(TURN_END, {"turn": turn, "status": "completed"}, time=now + 1),
    ]
    return Turn(user, chunks, tail, gaps)


def workload(sessions: int, turns: int, seed: int = 15) -> tuple[list[str], list[list[Turn]]]:
    rng = random.Random(seed)
    ids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(sessions)]
    plan: list[list[Turn]] = []
    for s in range(sessions):
        start = BASE_TIME + s * 1000
        turns_of: list[Turn] = []
        for t in range(1, turns + 1):
            turns_of.append(make_turn(rng, t, start))
            start += 60_000
        plan.append(turns_of)
    return ids, plan


def paced_batches(turn: Turn) -> list[list[NewEvent]]:
    """The reply's batches under the engine's flush rule, on the virtual clock."""
    batches: list[list[NewEvent]] = []
    pending: list[NewEvent] = []
    clock = 0.0
    first = 0.0
    for gap, chunk in zip(turn.gaps_ms, turn.chunks, strict=True):
        clock += gap / 1000
        if pending and clock - first >= CHUNK_FLUSH_SECONDS:  # the timer fired meanwhile
            batches.append(pending)
            pending = []
        if not pending:
            first = clock
        pending.append(chunk)
        if len(pending) >= CHUNK_FLUSH_EVENTS:
            batches.append(pending)
            pending = []
    batches.append([*pending, *turn.tail])
    return batches


@dataclass
class Fill:
    reply_seconds: float
    reply_events: int
    user_seconds: float
    events: int
    file_bytes: int  # the database's file once its store closed
    open_bytes: int = 0  # its pages in use and free just before that (``_tidy`` ran after)
    close_seconds: float = 0.0
    index_bytes: int = 0  # of ``file_bytes``, the pages of the FTS5 index (``index_pages``)


async def fill(
    store_cls: Any, path: Path, ids: list[str], plan: list[list[Turn]], *, paced: bool, sync: str
) -> Fill:
    reply_s = user_s = 0.0
    reply_events = events = 0
    store = await store_cls.open(path)
    try:
        await store._live().execute(f"PRAGMA synchronous = {sync}")
        for sid in ids:
            await store.create_session(sid, cwd="/home/dev/bench", created_at=BASE_TIME)
        for t in range(len(plan[0])):
            for s, sid in enumerate(ids):
                turn = plan[s][t]
                started = time.perf_counter()
                await store.append_batch(sid, [turn.user])
                user_s += time.perf_counter() - started
                batches = paced_batches(turn) if paced else [[*turn.chunks, *turn.tail]]
                started = time.perf_counter()
                for batch in batches:
                    await store.append_batch(sid, batch)
                reply_s += time.perf_counter() - started
                n = len(turn.chunks) + len(turn.tail)
                reply_events += n
                events += n + 1
        open_bytes = await pages_bytes(store)
    finally:
        started = time.perf_counter()
        await store.close()
        close_s = time.perf_counter() - started
    return Fill(
        reply_s,
        reply_events,
        user_s,
        events,
        file_bytes(path),
        open_bytes,
        close_s,
        index_pages(path),
    )


def index_pages(path: Path) -> int:
    """Bytes of a closed database's pages that belong to its full-text index: the FTS5
    tables' (``search_index_*``), not the ``search_messages`` rows, which hold the
    messages' text (on a linked file its only copy, so it is the log's). The reference keeps
    its full-text index in a database of its own, apart from the store it was measured
    on; 0 for a file without one (the baseline's)."""
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        (found,) = conn.execute(
            "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name LIKE 'search\\_index\\_%' ESCAPE '\\'"
        ).fetchone()
    finally:
        conn.close()
    return int(found)


async def pages_bytes(store: Any) -> int:
    """The bytes of the pages of a store's database (as its connection sees them, the
    write-ahead log's included), or 0 for a store without pages."""
    live = getattr(store, "_live", None)
    if live is None:
        return 0
    conn = live()
    pages = await (await conn.execute("PRAGMA page_count")).fetchone()
    size = await (await conn.execute("PRAGMA page_size")).fetchone()
    return int(pages[0]) * int(size[0])


def file_bytes(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


@dataclass
class Reads:
    full: float  # median seconds of read_events of the whole session
    tail: float  # ... of read_events_at of its last 50 seqs, gc.collect() before each
    warm_tail: float  # ... the same read back to back, the collector paused meanwhile
    events: int


async def reads(classes: list[tuple[str, Any]], tmp: Path, sid: str, reps: int) -> dict[str, Reads]:
    """Median times of a whole read and of the last 50 events, each store in turn call by
    call (interleaved, so a busy spell of a shared machine hits all of them alike).

    The last 50 are timed twice: after a ``gc.collect()`` each (as every other figure
    here), and back to back with the collector paused. The first includes waking the
    store's worker thread after the ~75 ms the collection keeps this thread busy (see
    ``hand_off``); the second is the read itself on a thread that is already awake."""
    stores = {name: await cls.open(tmp / f"{name}-batch-NORMAL.sqlite3") for name, cls in classes}
    try:
        full: dict[str, list[float]] = {name: [] for name in stores}
        tail: dict[str, list[float]] = {name: [] for name in stores}
        warm: dict[str, list[float]] = {name: [] for name in stores}
        counts: dict[str, int] = {}
        last: list[int] = []
        for _ in range(reps):
            for name, store in stores.items():
                samples, events = await time_async(lambda s=store: s.read_events(sid), 1)
                full[name] += samples
                counts[name] = len(events)
                last = [e.seq for e in events[-50:]]
        for _ in range(reps * 20):
            for name, store in stores.items():
                samples, _events = await time_async(lambda s=store: s.read_events_at(sid, last), 1)
                tail[name] += samples
        with gc_paused():
            for _ in range(reps * 20):
                for name, store in stores.items():
                    for _warm in range(5):
                        started = time.perf_counter()
                        await store.read_events_at(sid, last)
                        warm[name].append(time.perf_counter() - started)
    finally:
        for store in stores.values():
            await store.close()
    return {
        name: Reads(median(full[name]), median(tail[name]), median(warm[name]), counts[name])
        for name in stores
    }


async def hand_off(reps: int) -> float:
    """Median seconds of handing a no-op to a worker thread and back right after a
    ``gc.collect()``, as the cold last-50 read does: the part of that figure which is the
    machine's (waking an idle thread), not the store's."""
    samples, _none = await time_async(lambda: asyncio.to_thread(lambda: True), reps)
    return median(samples)


async def same_events(legacy: Any, base: Path, ours: Path, ids: list[str]) -> None:
    """Both stores read back the very same events (a layout may not change a byte)."""
    async with await SqliteSessionStore.open(ours) as a, await legacy.open(base) as b:
        for sid in ids[:2]:
            if await a.read_events(sid) != await b.read_events(sid):
                raise AssertionError("the stores read back different events")


async def run_workload(settings: Settings) -> list[Row]:
    sessions, turns = (5, 20) if settings.quick else (20, 50)
    ids, plan = workload(sessions, turns)
    legacy = legacy_store_class()
    stores: list[tuple[str, Any]] = [("ours", SqliteSessionStore)]
    if legacy is not None:
        stores.append(("base", legacy))
    figures: dict[tuple[str, str], Any] = {}
    with tempfile.TemporaryDirectory(prefix="dsh-bench-", dir=Path.home()) as tmp:
        for name, cls in stores:
            for mode, sync in (("batch", "NORMAL"), ("batch", "FULL"), ("paced", "NORMAL")):
                path = Path(tmp) / f"{name}-{mode}-{sync}.sqlite3"
                figures[(name, f"{mode}-{sync}")] = await fill(
                    cls, path, ids, plan, paced=mode == "paced", sync=sync
                )
        for name, figure in (await reads(stores, Path(tmp), ids[0], settings.reps(9, 5))).items():
            figures[(name, "reads")] = figure
        figures[("machine", "hand-off")] = await hand_off(settings.reps(100, 20))
        # The same events must read back from both stores (no layout may change a byte).
        if legacy is not None:
            await same_events(
                legacy,
                Path(tmp) / "base-paced-NORMAL.sqlite3",
                Path(tmp) / "ours-paced-NORMAL.sqlite3",
                ids,
            )

    def get(name: str, key: str) -> Any:
        return figures.get((name, key))

    rows: list[Row] = []
    size = f"{sessions} x {turns} turns"
    for mode, sync, target, limit in (
        ("batch", "NORMAL", "<= 20 B/event", 20.0),
        ("paced", "NORMAL", "<= 30 B/event", 30.0),
    ):
        ours, base = get("ours", f"{mode}-{sync}"), get("base", f"{mode}-{sync}")
        base_per = None if base is None else base.file_bytes / base.events

        sizes = (
            (
                f"storage: bytes/event, {mode}",
                ours.file_bytes,
                target,
                f"{ours.events:,} events, {ours.file_bytes / 1e6:.2f} MB once closed "
                f"({ours.open_bytes / ours.events:.1f} B/event just before: the close "
                f"merged the search index and gave back free pages in "
                f"{ours.close_seconds * 1e3:.0f} ms)",
            ),
            (
                f"storage: bytes/event, {mode}, full-text index apart",
                ours.file_bytes - ours.index_bytes,
                target + " (the reference's ground)",
                f"the row above without the FTS5 index's {ours.index_bytes / 1e6:.2f} MB "
                f"({ours.index_bytes / ours.events:.1f} B/event): the reference keeps its "
                "full-text index in a database of its own, not counted in its figure; the "
                "messages' text, which search scans, is counted here",
            ),
        )
        for label, stored, shown, note in sizes:
            per = stored / ours.events
            rows.append(
                Row(
                    label,
                    size,
                    per,
                    "B",
                    shown,
                    per <= limit,
                    baseline=base_per,
                    ratio=None if base_per is None else per / base_per,
                    note=note,
                )
            )
    for mode, sync, target, limit in (
        ("batch", "NORMAL", ">= 70,000 ev/s", 70_000.0),
        ("batch", "FULL", "(measured)", None),
        ("paced", "NORMAL", "(measured)", None),
    ):
        ours, base = get("ours", f"{mode}-{sync}"), get("base", f"{mode}-{sync}")
        rate = ours.reply_events / ours.reply_seconds
        base_rate = None if base is None else base.reply_events / base.reply_seconds
        rows.append(
            Row(
                f"storage: append ev/s, {mode}, synchronous={sync}",
                size,
                rate,
                "ev/s",
                target,
                None if limit is None else rate >= limit,
                baseline=None if base_rate is None else base_rate,
                ratio=None if base_rate is None else rate / base_rate,
                note=(
                    f"user messages (one append each): "
                    f"{ours.user_seconds / len(ids) / turns * 1e6:.0f} us each"
                    + (
                        ""
                        if base is None
                        else f" (base {base.user_seconds / len(ids) / turns * 1e6:.0f} us)"
                    )
                ),
            )
        )
    ours_r, base_r = get("ours", "reads"), get("base", "reads")
    rows.append(
        Row(
            "storage: read_events, whole session",
            f"{ours_r.events:,} events",
            ours_r.full,
            "s",
            "< 40 ms",
            ours_r.full < 0.040,
            baseline=None if base_r is None else base_r.full,
            ratio=None if base_r is None else ours_r.full / base_r.full,
        )
    )
    rows.append(
        Row(
            "storage: last 50 events (read_events_at)",
            f"{ours_r.events:,} events",
            ours_r.tail,
            "s",
            "< 0.5 ms",
            ours_r.tail < 0.0005,
            baseline=None if base_r is None else base_r.tail,
            ratio=None if base_r is None else ours_r.tail / base_r.tail,
            note=f"baseline: {BASE_COMMIT}'s SqliteSessionStore (schema v2), same run"
            if legacy is not None
            else "no baseline: git or commit " + BASE_COMMIT + " unavailable",
        )
    )
    hand = get("machine", "hand-off")
    rows.append(
        Row(
            "storage: last 50 events, back to back",
            f"{ours_r.events:,} events",
            ours_r.warm_tail,
            "s",
            "(measured)",
            None,
            baseline=None if base_r is None else base_r.warm_tail,
            ratio=None if base_r is None else ours_r.warm_tail / base_r.warm_tail,
            note=(
                "the row above without the gc.collect() before each read: its worker thread "
                f"is awake; a no-op hand-off to a thread after gc.collect() takes "
                f"{hand * 1e3:.2f} ms here"
            ),
        )
    )
    return rows


if __name__ == "__main__":  # pragma: no cover - manual runs
    from tests.benchmarks._common import format_table

    print(format_table(asyncio.run(run_workload(Settings(quick=False)))))
