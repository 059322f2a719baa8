"""Workload "stores": SQLite and PostgreSQL side by side, in one run, through ``open_store``.

For each store: streamed chunk events through the engine (events/s), single appends, the
``@`` candidates over many sessions, ``prepare`` of three long sources, and opening a long
session (its newest page, as the app does). The PostgreSQL row's baseline is the SQLite
figure, so the ratio reads "PostgreSQL / SQLite".

The server is ``$DSH_BENCH_PG`` (a URL to an empty database or schema) when set, else a
throwaway cluster started like the tests' one (``tests/pgcluster.py``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from core.log import (
    ASSISTANT_CHUNK,
    SESSION_TITLE,
    USER_MESSAGE,
    NewEvent,
    SessionHeader,
    user_message,
)
from core.references import SessionReferenceInput, SessionReferenceService
from core.store import SessionStore
from stores import SessionQuery, open_store
from tests.benchmarks import bench_append
from tests.benchmarks._common import Row, Settings, median, time_async
from tests.benchmarks._data import conversation

PAGE = 51  # the app's first page of a transcript (page size + one event of context)


@contextlib.contextmanager
def _postgres_url() -> Iterator[str]:
    given = os.environ.get("DSH_BENCH_PG")
    if given:
        yield given
        return
    from tests.pgcluster import find_binaries, running_cluster

    bindir = find_binaries()
    if bindir is None:
        raise SystemExit("bench stores: no PostgreSQL binaries; set DSH_BENCH_PG to a server URL")
    with running_cluster(bindir) as cluster:
        _name, url = cluster.fresh_schema_url()
        yield url


async def _seed(store: SessionStore, sessions: int, messages: int) -> list[SessionHeader]:
    """``sessions`` titled sessions (one exchange each) and three long sources."""
    for i in range(sessions):
        header = SessionHeader(f"s{i:06d}", 1_700_000_000_000 - i, f"/home/dev/p{i % 7}")
        await store.import_session(
            header,
            [
                NewEvent(USER_MESSAGE, user_message(f"question {i}"), "append", None, 1),
                NewEvent(SESSION_TITLE, {"title": f"Topic {i} kubernetes" if i % 3 else f"Topic {i}"}, None, None, 2),
            ],
        )  # fmt: skip
    sources = []
    for n in range(3):
        header = SessionHeader(f"long-{n}", 1_750_000_000_000 + n, "/home/dev/long")
        log = conversation(messages, seed=n, big_every=10**9)
        await store.import_session(
            header,
            [NewEvent(e.type, e.data, e.surface_op, None, 1_000 + i) for i, e in enumerate(log)],
        )
        sources.append(header)
    return sources


async def _measure(
    location: str | Path, settings: Settings, kind: str
) -> dict[str, tuple[float, list[float]]]:
    sessions = 1_000 if settings.quick else 10_000
    messages = 2_000 if settings.quick else 20_000
    chunks = 5_000 if settings.quick else 20_000
    reps = settings.reps(7, 3)
    out: dict[str, tuple[float, list[float]]] = {}

    rates = []
    for _ in range(settings.reps(3, 1)):
        elapsed, _stall = await bench_append.one_run(location, chunks)
        rates.append(chunks / elapsed)
    out["append: chunk events/s (engine)"] = (median(rates), rates)

    store = await open_store(location)
    try:
        sources = await _seed(store, sessions, messages)
        target = await store.create_session("bench-target", cwd="/home/dev/p1")
        single = await store.create_session("bench-single")
        started = time.perf_counter()
        for i in range(1_000):
            await store.append(single.id, ASSISTANT_CHUNK, {"i": i, "text": "tok "})
        out["append: one event per transaction"] = (
            (time.perf_counter() - started) / 1_000,
            [],
        )
        query = SessionQuery(store)
        service = SessionReferenceService(query)
        samples, _ = await time_async(lambda: service.list_candidates(target, ""), reps)
        out["candidates: all"] = (median(samples), samples)
        samples, _ = await time_async(lambda: service.list_candidates(target, "kubern"), reps)
        out["candidates: query"] = (median(samples), samples)
        refs = [SessionReferenceInput(h.id) for h in sources]
        samples, _ = await time_async(lambda: service.prepare(target, "x", refs), reps)
        out["prepare: 3 long sources"] = (median(samples), samples)
        samples, _ = await time_async(lambda: query.read_surface_window(sources[0].id, PAGE), reps)
        out["open a long session: newest page"] = (median(samples), samples)
    finally:
        await store.close()
    return out


async def run_workload(settings: Settings) -> list[Row]:
    sessions = 1_000 if settings.quick else 10_000
    messages = 2_000 if settings.quick else 20_000
    sizes = {
        "append: chunk events/s (engine)": "5,000 chunks" if settings.quick else "20,000 chunks",
        "append: one event per transaction": "1,000 appends",
        "candidates: all": f"{sessions:,} sessions",
        "candidates: query": f"{sessions:,} sessions",
        "prepare: 3 long sources": f"3 x {messages:,} messages",
        "open a long session: newest page": f"{messages:,} messages",
    }
    with tempfile.TemporaryDirectory(prefix="dsh-bench-") as tmp:
        sqlite = await _measure(Path(tmp) / "stores.sqlite3", settings, "sqlite")
    with _postgres_url() as url:
        postgres = await _measure(url, settings, "postgres")
    rows: list[Row] = []
    for name, (lite, lite_samples) in sqlite.items():
        pg, pg_samples = postgres[name]
        unit = "ev/s" if "ev/s" in name else "s"
        rows.append(
            Row(f"stores/sqlite: {name}", sizes[name], lite, unit, "-", None, samples=lite_samples)
        )
        rows.append(
            Row(
                f"stores/postgres: {name}",
                sizes[name],
                pg,
                unit,
                "-",
                None,
                baseline=lite,
                ratio=pg / lite,
                note="baseline = SQLite in the same run",
                samples=pg_samples,
            )
        )
    return rows
