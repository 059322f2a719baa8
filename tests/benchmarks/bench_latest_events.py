"""Workload "latest_events" (issue 32): ``read_latest_events`` over many sessions in SQLite,
beside ``read_titles`` (the same shape: one partial index, one row lookup per session).

The database is written through the store (``import_session``, so chunks are packed as a
live store packs them): 10,000 sessions of 100 events each, 1,000,000 in all, mostly
streamed ``assistant/chunk`` (``--quick``: 1,000 sessions). Every session has a title, a
third switched profile (twice), a tenth is a fork (its seq 0). Measured, each with the
store's listing cache emptied before every call (what a call after any write costs):

- ``read_latest_events(session/profile)`` and ``(session/fork)`` of every session;
- ``read_latest_events(session/profile, ids)`` of one sidebar page (100 ids);
- ``read_titles`` of every session and of the page (the baselines: what the sidebar
  already pays);
- the listing as the store keeps it while nothing is written (no query);
- the same statement without its index (``events NOT INDEXED``: a read of every row's
  kind and type), what the index saves;
- the schema v12 upgrade's work on this database (issue 33, as v11's was: the index
  dropped, ``_split_packed_marks`` of sources reading every pack's header, then the
  index of the three mark types built), in a transaction rolled back.

``python -m tests.benchmarks --only latest_events [--quick]``.
"""

from __future__ import annotations

import gc
import random
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from core.log import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    SESSION_FORK,
    SESSION_PROFILE,
    SESSION_TITLE,
    TURN_END,
    USER_MESSAGE,
    NewEvent,
    SessionHeader,
    assistant_message,
    user_message,
)
from stores import SqliteSessionStore
from stores import sqlite as sqlite_store
from tests.benchmarks._common import Row, Settings, median

EVENTS_PER_SESSION = 100
PAGE = 100  # ids of one sidebar page


TURNS = 3
VOCABULARY = [
    "the",
    "store",
    "reads",
    "every",
    "session",
    "once",
    "and",
    "the",
    "index",
    "holds",
    "only",
    "a",
    "few",
    "rows",
    "per",
    "session",
    "while",
    "chunks",
    "stream",
    "into",
    "packs",
    "of",
    "many",
    "events",
    "compressed",
    "together",
    "with",
    "their",
    "runs",
    "kubernetes",
    "upgrade",
    "latency",
    "budget",
    "checkout",
    "redesign",
    "release",
    "notes",
    "café",
    "日本語",
    "検索",
]


def _session_log(i: int) -> list[NewEvent]:
    """``EVENTS_PER_SESSION`` events: ``TURNS`` turns of a streamed reply each."""
    rng = random.Random(i)
    log: list[NewEvent] = []
    if i % 10 == 0:
        log.append(NewEvent(SESSION_FORK, {"parent": {"id": f"s{i + 1:06d}", "seq": 7}}))
    log.append(NewEvent(SESSION_TITLE, {"title": f"Topic {i}", "source": {"kind": "user"}}))
    profiles = 2 if i % 3 == 0 else 0
    chunks = EVENTS_PER_SESSION - len(log) - profiles - 3 * TURNS  # message, reply, end
    for turn in range(1, TURNS + 1):
        if turn <= profiles:
            profile = {"profile": f"p{turn}", "provider": "offline", "model": f"m{i % 5}"}
            log.append(NewEvent(SESSION_PROFILE, profile))
        log.append(NewEvent(USER_MESSAGE, user_message(f"question {turn} of {i}"), "append"))
        count = chunks // TURNS + (1 if turn <= chunks % TURNS else 0)
        words = [" ".join(rng.choices(VOCABULARY, k=rng.randint(2, 8))) + " " for _ in range(count)]
        log += [
            NewEvent(
                ASSISTANT_CHUNK,
                {"turn": turn, "step": 0, "chunk": {"type": "text-delta", "index": k, "text": w}},
            )
            for k, w in enumerate(words)
        ]
        reply = assistant_message("".join(words), provider="offline", model="m")
        log.append(
            NewEvent(ASSISTANT_MESSAGE, {"turn": turn, "step": 0, "message": reply}, "append")
        )
        log.append(NewEvent(TURN_END, {"turn": turn}))
    assert len(log) == EVENTS_PER_SESSION
    return [NewEvent(e.type, e.data, e.surface_op, None, 1_000 + k) for k, e in enumerate(log)]


async def _seed(path: Path, sessions: int) -> int:
    events = 0
    async with await SqliteSessionStore.open(path) as store:
        for i in range(sessions):
            log = _session_log(i)
            header = SessionHeader(f"s{i:06d}", 1_700_000_000_000 - i, "/w")
            await store.import_session(header, log)
            events += len(log)
    return events


async def _timed(
    store: SqliteSessionStore, reps: int, call: Any, *, memo: bool = True
) -> tuple[float, list[float], Any]:
    """Median seconds of ``call()`` with the store's listing cache emptied before each
    (what a call after any write costs); ``memo=False``: the title memo too (titles
    decoded again, as ``read_latest_events`` always decodes)."""
    samples: list[float] = []
    result = None
    for _ in range(reps):
        store._listings.clear()
        if not memo:
            store._title_memo.clear()
        gc.collect()
        started = time.perf_counter()
        result = await call()
        samples.append(time.perf_counter() - started)
    return median(samples), samples, result


def _upgrade_step(path: Path) -> float:
    """Seconds the schema v12 step takes on this database (rolled back)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        started = time.perf_counter()
        drop, split, create = sqlite_store.MIGRATIONS[11]
        conn.execute(drop)
        sqlite_store._split_packed_marks(conn, sqlite_store._MARKS_OF_STEP[split])
        conn.execute(create)
        elapsed = time.perf_counter() - started
        conn.execute("ROLLBACK")
        return elapsed
    finally:
        conn.close()


def _sql_only(path: Path, reps: int) -> dict[str, tuple[float, list[float]]]:
    """The statements alone (plain ``sqlite3``, rows fetched, nothing decoded, a warm
    page cache): the profiles' with its index and without (``events NOT INDEXED``: every
    row's kind and type read), the titles'."""
    indexed = sqlite_store.latest_events_sql(SESSION_PROFILE)
    statements = {
        "sql profiles": indexed,
        "sql unindexed": indexed.replace("FROM events WHERE", "FROM events NOT INDEXED WHERE", 1),
        "sql titles": sqlite_store.titles_sql(),
    }
    conn = sqlite3.connect(path)
    try:
        samples: dict[str, list[float]] = {name: [] for name in statements}
        for _ in range(reps):  # interleaved: drift hits each alike
            for name, sql in statements.items():
                started = time.perf_counter()
                conn.execute(sql).fetchall()
                samples[name].append(time.perf_counter() - started)
        return {name: (median(found), found) for name, found in samples.items()}
    finally:
        conn.close()


async def run_workload(settings: Settings) -> list[Row]:
    sessions = 1_000 if settings.quick else 10_000
    reps = settings.reps(15, 5)
    with tempfile.TemporaryDirectory(prefix="dsh-bench-") as tmp:
        path = Path(tmp) / "latest.sqlite3"
        started = time.perf_counter()
        events = await _seed(path, sessions)
        seeded = time.perf_counter() - started
        size = f"{sessions:,} sessions, {events:,} events"
        page = [f"s{i:06d}" for i in range(0, sessions, sessions // PAGE)][:PAGE]
        async with await SqliteSessionStore.open(path) as store:
            times: dict[str, tuple[float, list[float]]] = {}
            found: dict[str, Any] = {}
            calls: dict[str, tuple[Any, bool]] = {
                "titles": (store.read_titles, True),
                "titles cold": (store.read_titles, False),
                "profiles": (lambda: store.read_latest_events(SESSION_PROFILE), True),
                "forks": (lambda: store.read_latest_events(SESSION_FORK), True),
                "page": (lambda: store.read_latest_events(SESSION_PROFILE, page), True),
                "titles page": (lambda: store.read_titles(page), True),
            }
            for name, (call, memo) in calls.items():
                t, samples, found[name] = await _timed(store, reps, call, memo=memo)
                times[name] = (t, samples)
            store._listings.clear()
            await store.read_latest_events(SESSION_PROFILE)  # fills the cache
            samples = []
            for _ in range(reps):
                t0 = time.perf_counter()
                await store.read_latest_events(SESSION_PROFILE)
                samples.append(time.perf_counter() - t0)
            times["cached"] = (median(samples), samples)
        profiles, forks, paged = found["profiles"], found["forks"], found["page"]
        if len(found["titles"]) != sessions or len(forks) != (sessions + 9) // 10:
            raise AssertionError("the seeded titles or forks do not read back")
        if len(profiles) != (sessions + 2) // 3 or any(
            e.data["profile"] != "p2" for e in profiles.values()
        ):
            raise AssertionError("the seeded profiles do not read back")
        if set(paged) != {sid for sid in page if int(sid[1:]) % 3 == 0}:
            raise AssertionError("the page's profiles do not read back")
        sql = _sql_only(path, reps)
        upgrade = _upgrade_step(path)
        file_mb = path.stat().st_size / 1e6

    def row(
        name: str, what: str, target: str = "-", versus: str | None = None, note: str = ""
    ) -> Row:
        ours, samples = times[what] if what in times else sql[what]
        base = None if versus is None else (times[versus] if versus in times else sql[versus])
        return Row(
            f"latest_events: {name}",
            size,
            ours,
            "s",
            target,
            None if base is None or target == "-" else ours <= 2 * base[0],
            baseline=None if base is None else base[0],
            ratio=None if base is None else ours / base[0],
            note=note,
            samples=samples,
            baseline_samples=[] if base is None else base[1],
        )

    return [
        row("read_titles (baseline)", "titles", note="titles memoised (as after a write)"),
        row("read_titles, memo emptied", "titles cold"),
        row(
            "profiles, every session",
            "profiles",
            "<= 2x titles",
            "titles",
            f"{len(profiles):,} sessions have one; seeded in {seeded:.0f} s, file {file_mb:.0f} MB",
        ),
        row("forks, every session", "forks", "<= 2x titles", "titles"),
        row(f"profiles, {PAGE} ids", "page", "<= 2x titles", "titles page"),
        row("profiles, cached listing", "cached", note="no write since: no query"),
        row("SQL only: profiles", "sql profiles", versus="sql titles", note="baseline: titles'"),
        row(
            "SQL only: profiles without the index",
            "sql unindexed",
            versus="sql profiles",
            note="events NOT INDEXED, warm page cache (a cold one reads the whole file)",
        ),
        Row(
            "latest_events: schema v12 upgrade step",
            size,
            upgrade,
            "s",
            "-",
            None,
            note="every pack's header read (none holds a source here), events_marks rebuilt",
        ),
    ]
