"""Workload ``search`` (issue 18): full-text search of messages on SQLite at 2,000 sessions x
100 messages (200,000 messages), in process.

* search: ``search_messages(query, limit=20)`` over a mix of queries (a rare word, a
  common word, two words, a substring, a CJK pair, a two-character term); target median
  <= 20 ms;
* picker update: ``SessionReferenceService.discover`` (what one keystroke in the ``@``
  picker asks: candidates and body matches); target median <= 50 ms;
* append throughput with the index beside the same appends with it switched off
  (``stores.sqlite.search.SEARCH_INDEX``), interleaved in one run on the same database: one
  message per transaction (the index's worst case) and a streamed turn (a user message,
  40 chunks in 4 batches, the reply); target: within 10 %;
* the index's size on disk (``dbstat``: the ``search_messages`` rows, the FTS5 tables and
  the short terms' block index, ``short_grams``) beside the rest of the database.
"""

from __future__ import annotations

import random
import sqlite3
import tempfile
import time
from pathlib import Path

import stores.sqlite as sqlite_store
from core.engine import ChatSession
from core.log import (
    ASSISTANT_MESSAGE,
    SESSION_TITLE,
    USER_MESSAGE,
    NewEvent,
    SessionHeader,
    assistant_message,
    user_message,
)
from core.references import SessionReferenceService
from stores import SessionQuery, SqliteSessionStore
from tests.benchmarks._common import Row, Settings, median
from tests.benchmarks.bench_append import ScriptedProvider

BASE_TIME = 1_760_000_000_000
_SYLLABLES = [
    "ka",
    "ro",
    "mi",
    "tes",
    "lan",
    "dor",
    "vi",
    "sel",
    "qua",
    "bre",
    "nix",
    "pol",
    "tor",
    "um",
    "fa",
    "ge",
    "hin",
    "jo",
    "lu",
    "mer",
    "no",
    "pra",
    "sti",
    "ver",
    "wu",
    "xa",
    "yel",
    "zon",
    "cre",
    "dra",
]
QUERIES = (
    ("rare word", "retrypolicy"),
    ("common word", "deploy"),
    ("two words", "kubernetes rollback"),
    ("substring", "ndorv"),
    ("CJK pair", "检索"),
    ("short term", "qu"),
)


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


_PLAIN = ["deploy", "kubernetes", "rollback", "release", "latency", "budget", "the", "and"]


def _message(rng: random.Random, vocabulary: list[str], i: int) -> str:
    """About 20-300 characters of words, Zipf-ish: a few common ones, many rare ones."""
    words: list[str] = []
    for _ in range(rng.randint(4, 45)):
        roll = rng.random()
        if roll < 0.3:
            words.append(rng.choice(_PLAIN))
        elif roll < 0.32:
            words.append(rng.choice(("检索", "中文", "测试", "日本語")))
        else:
            words.append(vocabulary[int(len(vocabulary) * rng.random() ** 3)])
    if i % 5_000 == 17:
        words.insert(rng.randrange(len(words)), "retrypolicy")
    return " ".join(words)


def _session_events(rng: random.Random, vocabulary: list[str], k: int, n: int) -> list[NewEvent]:
    events = [
        NewEvent(
            SESSION_TITLE,
            {"title": f"Session {k}", "source": {"kind": "user"}},
            time=BASE_TIME + k,
        )
    ]
    for i in range(n):
        text = _message(rng, vocabulary, k * n + i)
        at = BASE_TIME + k * 1_000 + i
        if i % 2 == 0:
            events.append(NewEvent(USER_MESSAGE, user_message(text, id=f"u{i}"), "append", time=at))
        else:
            message = assistant_message(text, provider="bench", model="m", id=f"a{i}")
            data = {"turn": i // 2 + 1, "step": 0, "message": message}
            events.append(NewEvent(ASSISTANT_MESSAGE, data, "append", time=at))
    return events


async def _seed(store: SqliteSessionStore, sessions: int, messages: int) -> list[SessionHeader]:
    rng = random.Random(18)
    vocabulary = _vocabulary(rng, 20_000)
    headers = []
    for k in range(sessions):
        header = SessionHeader(f"s{k:05d}", BASE_TIME + k, f"/p/{k % 7}")
        await store.import_session(header, _session_events(rng, vocabulary, k, messages))
        headers.append(header)
    return headers


async def _time(fn: object, reps: int) -> list[float]:
    samples = []
    for _ in range(reps):
        started = time.perf_counter()
        await fn()  # type: ignore[operator]
        samples.append(time.perf_counter() - started)
    return samples


REPLY_CHUNKS = 200
"""Streamed deltas per reply in the engine turns (the storage workload's size)."""


async def _append_rates(
    store: SqliteSessionStore, rounds: int, per_round: int
) -> dict[tuple[str, bool], list[float]]:
    """Events per second, index on and off alternating in small blocks (so the machine's
    noise and SQLite's checkpoints fall on both alike): through the engine (a question
    and a reply of ``REPLY_CHUNKS`` streamed deltas per turn: what a chat appends), and
    one message per transaction (the index's worst case)."""
    rng = random.Random(7)
    query = SessionQuery(store)
    service = SessionReferenceService(query)
    spent: dict[tuple[str, bool], list[float]] = {}
    counts: dict[tuple[str, bool], list[int]] = {}
    chats = {}
    for indexed in (True, False):
        header = await store.create_session(f"chat-{indexed}")
        chats[indexed] = (
            header.id,
            ChatSession(store, query, service, ScriptedProvider(REPLY_CHUNKS), header),
        )
        await store.create_session(f"append-{indexed}", created_at=BASE_TIME)
    for round_no in range(rounds):
        for indexed in (True, False) if round_no % 2 == 0 else (False, True):
            sqlite_store.search.SEARCH_INDEX = indexed
            try:
                sid, chat = chats[indexed]
                before = await store.last_surface_seq(sid) or 0
                text = " ".join(rng.choice(_PLAIN) for _ in range(30))
                started = time.perf_counter()
                async for _ in chat.send(text):
                    pass
                elapsed = time.perf_counter() - started
                added = (await store.last_surface_seq(sid) or 0) - before
                spent.setdefault(("engine", indexed), []).append(elapsed)
                counts.setdefault(("engine", indexed), []).append(added)
                texts = [" ".join(rng.choice(_PLAIN) for _ in range(30)) for _ in range(per_round)]
                started = time.perf_counter()
                for text in texts:
                    await store.append(
                        f"append-{indexed}", USER_MESSAGE, user_message(text), surface_op="append"
                    )
                spent.setdefault(("message", indexed), []).append(time.perf_counter() - started)
                counts.setdefault(("message", indexed), []).append(per_round)
            finally:
                sqlite_store.search.SEARCH_INDEX = True
    # Rates over groups of 5 blocks: a median of rates, each over enough work to count.
    rates: dict[tuple[str, bool], list[float]] = {}
    for key, times in spent.items():
        done = counts[key]
        rates[key] = [sum(done[i : i + 5]) / sum(times[i : i + 5]) for i in range(0, len(times), 5)]
    return rates


def _sizes(path: Path) -> tuple[int, int]:
    """Bytes of the search index (its rows and the FTS5 tables) and of the whole file."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
    finally:
        conn.close()
    index = sum(
        size
        for name, size in rows
        if name.startswith(("search_", "sqlite_autoindex_search", "short_grams"))
    )
    return index, sum(size for _, size in rows)


async def run_workload(settings: Settings) -> list[Row]:
    sessions, messages = (200, 100) if settings.quick else (2_000, 100)
    reps = settings.reps(9, 3)
    rows: list[Row] = []
    size = f"{sessions:,} sessions x {messages} messages"
    with tempfile.TemporaryDirectory(prefix="dsh-bench-search-") as tmp:
        path = Path(tmp) / "search.sqlite3"
        async with await SqliteSessionStore.open(path) as store:
            started = time.perf_counter()
            headers = await _seed(store, sessions, messages)
            seeded = time.perf_counter() - started
            service = SessionReferenceService(SessionQuery(store))
            target = headers[len(headers) // 2]
            search_t: dict[str, list[float]] = {}
            picker_t: dict[str, list[float]] = {}
            found: dict[str, int] = {}
            for name, query in QUERIES:
                hits = await store.search_messages(query, limit=20)  # warm, and checked
                if not hits:
                    raise AssertionError(f"nothing found for {query!r}")
                found[name] = len(hits)
                search_t[name] = await _time(
                    lambda q=query: store.search_messages(q, limit=20), reps
                )
                picker_t[name] = await _time(lambda q=query: service.discover(target, q), reps)
            rates = await _append_rates(store, settings.reps(100, 20), 20)
        index_bytes, total_bytes = _sizes(path)
    all_search = [s for samples in search_t.values() for s in samples]
    all_picker = [s for samples in picker_t.values() for s in samples]
    per_query = ", ".join(
        f"{name} {median(search_t[name]) * 1000:.1f}/{median(picker_t[name]) * 1000:.1f} ms"
        for name, _ in QUERIES
    )
    rows.append(
        Row(
            "search: search_messages (limit 20)",
            size,
            median(all_search),
            "s",
            "<= 20 ms median",
            median(all_search) <= 0.020,
            note=f"per query, search/picker: {per_query}; seeding took {seeded:.0f} s",
            samples=all_search,
        )
    )
    rows.append(
        Row(
            "search: picker update (discover)",
            size,
            median(all_picker),
            "s",
            "<= 50 ms median",
            median(all_picker) <= 0.050,
            samples=all_picker,
        )
    )
    for kind, what, target in (
        ("engine", f"chat turns of {REPLY_CHUNKS} chunks", "within 10% of no index"),
        ("message", "one message a transaction", "reported"),
    ):
        on, off = median(rates[(kind, True)]), median(rates[(kind, False)])
        rows.append(
            Row(
                f"search: append with the index ({what})",
                size,
                on,
                "ev/s",
                target,
                on >= 0.9 * off if kind == "engine" else None,
                baseline=off,
                ratio=on / off,
                note="baseline: the same appends with the index switched off, interleaved",
                samples=rates[(kind, True)],
                baseline_samples=rates[(kind, False)],
            )
        )
    rows.append(
        Row(
            "search: index size",
            size,
            index_bytes / 1e6,
            "MB",
            "reported",
            None,
            baseline=total_bytes / 1e6,
            ratio=index_bytes / total_bytes,
            note="baseline: the whole database; ratio: the index's share",
        )
    )
    return rows
