"""Workload 2: ``list_candidates`` (SPEC §4.4) over many titled sessions in SQLite.

The floor is the store's own ``SELECT``s of the headers and latest titles run with plain
``sqlite3`` (rows fetched, nothing decoded): what any implementation on this schema pays.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
import time
from functools import partial
from pathlib import Path

from core.references import SessionReferenceService
from stores import SessionQuery, SqliteSessionStore
from stores.sqlite import titles_sql
from tests.benchmarks._common import Row, Settings, loop_ticker, median, time_async, time_sync
from tests.benchmarks._seed import check_seeded, create_schema, seed_sessions

HEADERS_SQL = "SELECT id, created_at, cwd FROM sessions ORDER BY created_at DESC, id"
TITLES_SQL = titles_sql()  # the statement the store runs
QUERIES = (("empty query", ""), ("query 'release'", "release"))


def floor(conn: sqlite3.Connection) -> int:
    headers = conn.execute(HEADERS_SQL).fetchall()
    titles = conn.execute(TITLES_SQL).fetchall()
    return len(headers) + len(titles)


async def run_size(count: int, settings: Settings) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="dsh-bench-") as tmp:
        path = Path(tmp) / "candidates.sqlite3"
        await create_schema(path)
        headers = seed_sessions(path, count)
        await check_seeded(path, headers)
        target = headers[len(headers) // 3]
        reps = settings.reps(15, 5)
        conn = sqlite3.connect(path)  # kept open, like the store's: a warm page cache
        try:
            async with await SqliteSessionStore.open(path) as store:
                service = SessionReferenceService(SessionQuery(store))
                stop = asyncio.Event()
                lateness: list[float] = []
                ticker = asyncio.create_task(loop_ticker(stop, lateness))
                await asyncio.sleep(0.02)  # the ticker is running
                started = time.perf_counter()
                await service.list_candidates(target, "")
                cold = time.perf_counter() - started
                stop.set()
                await ticker
                cold_pause = max(lateness, default=0.0)
                # Interleaved repetitions: drift on a noisy machine hits both sides alike.
                floor_t: list[float] = []
                ours_t: dict[str, list[float]] = {query: [] for _, query in QUERIES}
                for _ in range(reps):
                    floor_t += time_sync(partial(floor, conn), 1)[0]
                    for _, query in QUERIES:
                        samples, found = await time_async(
                            partial(service.list_candidates, target, query), 1
                        )
                        ours_t[query] += samples
                        if not found or (
                            query and not all(query in c.label.casefold() for c in found)
                        ):
                            raise AssertionError(f"unexpected candidates for {query!r}")
        finally:
            conn.close()
        for name, query in QUERIES:
            ours = median(ours_t[query])
            ratio = ours / median(floor_t)
            met = ratio <= 3 and (count > 10_000 or ours <= 0.030)
            rows.append(
                Row(
                    f"candidates, {name}",
                    f"{count:,} sessions",
                    ours,
                    "s",
                    "<= 3x floor" + ("; <= 30 ms" if count <= 10_000 else ""),
                    met,
                    baseline=median(floor_t),
                    ratio=ratio,
                    note=""
                    if query
                    else (
                        f"first call after opening the store: {cold * 1000:.0f} ms "
                        f"(longest event-loop pause meanwhile {cold_pause * 1000:.0f} ms)"
                    ),
                    samples=ours_t[query],
                    baseline_samples=floor_t,
                )
            )
    return rows


async def run_workload(settings: Settings) -> list[Row]:
    rows: list[Row] = []
    for count in (2_000, 10_000) if settings.quick else (10_000, 100_000):
        rows += await run_size(count, settings)
    return rows
