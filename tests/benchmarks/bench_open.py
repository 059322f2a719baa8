"""Opening is bounded by the page (issue 15): the app shows the newest page of a
1,000,000-event session (200,000 with ``--quick``) in under 300 ms, and ``dsh show --tail
N`` takes the same time at 10,000 and at 1,000,000 events.

The session has the shape of ``prepare_scale``'s source (turns of a user message, 80
streamed chunks, a tool call and its result, the answer and a turn end; a compaction of
the first tenth). It is built once through the store's ``import_session`` and cached in
``/tmp`` (``dsh-bench-open-v1-s<schema>-*.sqlite3``; delete it to rebuild).

* open: ``app.open_session`` from a small session until the newest item is mounted, laid
  out and the screen refreshed (the count of the earlier items that follows, for the
  "Load earlier messages (N more)" button, is not timed). Beside it, in the same run, the app as it was before
  (``read_surface_window``: every surface seq folded before the page is read).
* show --tail 20: ``SessionQuery.read_surface_page`` (what ``dsh show --tail`` reads) at
  10,000 and at 1,000,000 events, and the whole ``dsh show --tail 20`` in a child process.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from core.config import DshConfig
from core.log import SessionHeader
from core.providers.offline import OfflineProvider
from stores import SessionQuery, SqliteSessionStore
from stores.sqlite import SCHEMA_VERSION
from tests.benchmarks._common import Row, Settings, median, time_async
from tests.benchmarks.bench_prepare_scale import source_events
from tests.ui.conftest import make_app
from tui.app.app import DshApp
from tui.app.transcript.transcript import PAGE_SIZE
from tui.shared.runtime import open_runtime

SIZE = (120, 40)
LONG, SHORT, SMALL = "long", "short", "small"
VERSION = "v1"


async def cached_database(long_events: int) -> Path:
    """The benchmark's database, built once (its sessions: ``long`` of ``long_events``
    events, ``short`` of 10,000, ``small`` of a few)."""
    # Per schema version too: a dsh of a newer schema upgrades the file it opens, which
    # a dsh of an older one then refuses (another checkout's run of this benchmark).
    path = Path(f"/tmp/dsh-bench-open-{VERSION}-s{SCHEMA_VERSION}-{long_events}.sqlite3")
    if await asyncio.to_thread(path.exists):
        return path
    partial = path.with_suffix(".building")
    for stale in (partial, Path(str(partial) + "-wal"), Path(str(partial) + "-shm")):
        await asyncio.to_thread(stale.unlink, missing_ok=True)
    started = time.perf_counter()
    async with await SqliteSessionStore.open(partial) as store:
        for sid, count, created in ((LONG, long_events, 1), (SHORT, 10_000, 2), (SMALL, 300, 3)):
            batch = source_events(count)
            header = SessionHeader(sid, 1_700_000_000_000 + created, "/src")
            await store.import_session(header, batch)
            del batch
    await asyncio.to_thread(partial.rename, path)
    print(f"  built {path} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return path


async def _until(condition: Callable[[], object], limit: float = 60.0) -> None:
    """Poll ``condition`` every millisecond, letting the app run in between."""
    deadline = time.perf_counter() + limit
    while not condition():
        if time.perf_counter() > deadline:
            raise AssertionError("the UI did not reach the expected state in time")
        await asyncio.sleep(0.001)


async def _open_once(app: DshApp, session_id: str, last: int) -> float:
    await app.open_session(SMALL)
    await asyncio.wait_for(app.transcript.wait_until_settled(), 60)
    started = time.perf_counter()
    await app.open_session(session_id)
    transcript = app.transcript
    await _until(
        lambda: (
            last in transcript.known_seqs
            and transcript.item_widgets
            and transcript.item_widgets[-1].is_mounted
        )
    )
    painted = asyncio.Event()  # laid out and drawn: the screen's next refresh
    app.call_after_refresh(painted.set)
    await asyncio.wait_for(painted.wait(), 60)
    elapsed = time.perf_counter() - started
    # Not timed: what follows the page (the earlier items counted for the button).
    await asyncio.wait_for(transcript.wait_until_settled(), 60)
    return elapsed


async def measure_open(path: Path, reps: int) -> tuple[list[float], list[float], list[float]]:
    """Opening the long session now and as before, and the 10,000-event one now."""
    async with await SqliteSessionStore.open(path) as store:
        last = await store.last_surface_seq(LONG)
        short_last = await store.last_surface_seq(SHORT)
        assert last is not None and short_last is not None
        config = DshConfig(database=path)
        async with open_runtime(config, store=store, provider=OfflineProvider()) as runtime:
            app = make_app(runtime)
            async with app.run_test(size=SIZE):
                await _until(lambda: app.current_id is not None)
                query = runtime.query

                async def whole_window(session_id: str) -> object:
                    """The app before: every surface seq folded first."""
                    return await query.read_surface_window(session_id, PAGE_SIZE + 1)

                ours: list[float] = []
                before: list[float] = []
                short: list[float] = []
                for _ in range(reps):
                    short.append(await _open_once(app, SHORT, short_last))
                    ours.append(await _open_once(app, LONG, last))
                    app.read_window = whole_window  # type: ignore[method-assign,assignment]
                    before.append(await _open_once(app, LONG, last))
                    del app.read_window
    return ours, before, short


def _show_child(path: Path, session_id: str) -> float:
    env = {**os.environ, "NO_COLOR": "1"}
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "tui.cli", "--db", str(path), "show", session_id, "--tail", "20"],
        check=True,
        capture_output=True,
        env=env,
    )
    return time.perf_counter() - started


async def run_workload(settings: Settings) -> list[Row]:
    long_events = 200_000 if settings.quick else 1_000_000
    path = await cached_database(long_events)
    ours, before, short = await measure_open(path, settings.reps(5, 2))
    async with await SqliteSessionStore.open(path) as store:
        query = SessionQuery(store)
        reps = settings.reps(21, 5)
        long_t = median((await time_async(lambda: query.read_surface_page(LONG, 20), reps))[0])
        short_t = median((await time_async(lambda: query.read_surface_page(SHORT, 20), reps))[0])
    child_reps = settings.reps(5, 2)
    long_c = median([await asyncio.to_thread(_show_child, path, LONG) for _ in range(child_reps)])
    short_c = median([await asyncio.to_thread(_show_child, path, SHORT) for _ in range(child_reps)])
    open_t, before_t = median(ours), median(before)
    size = f"{long_events:,} events"
    return [
        Row(
            "open: newest page drawn",
            size,
            open_t,
            "s",
            "< 300 ms",
            open_t < 0.3,
            baseline=before_t,
            ratio=open_t / before_t,
            note=(
                "open_session until the newest item is mounted and laid out; baseline: the "
                f"app folding every surface seq first (before); worst {max(ours) * 1e3:.0f} ms; "
                f"the 10,000-event session opens in {median(short) * 1e3:.0f} ms"
            ),
            samples=ours,
            baseline_samples=before,
        ),
        Row(
            "show --tail 20: the read",
            f"{long_events:,} vs 10,000 events",
            long_t,
            "s",
            "independent of length",
            long_t <= 3 * short_t,
            baseline=short_t,
            ratio=long_t / short_t,
            note="read_surface_page(20); baseline: the same on the 10,000-event session",
        ),
        Row(
            "show --tail 20: the command",
            f"{long_events:,} vs 10,000 events",
            long_c,
            "s",
            "independent of length",
            long_c <= 1.5 * short_c,
            baseline=short_c,
            ratio=long_c / short_c,
            note="dsh show --tail 20 in a child process (start-up included); baseline: 10,000",
        ),
    ]
