"""``dsh replay``: a log file of 100,000 events (10,000 with ``--quick``) to its newest page
drawn, target under 1 s; beside it the floor of reading and JSON-decoding every line.

* The app (``dsh replay FILE``): ``open_replay(lazy=True)`` reads the file's lines and the
  newest page's events only, the app draws that page, and the whole file is checked and
  loaded in a worker thread afterwards (its time is in the note). Timed from the start to
  the newest item mounted and the screen's next refresh.
* ``--svg`` (``dsh replay FILE --svg``): the whole file is checked before anything is drawn
  (a bad file must exit non-zero with its line), then the screen is rendered: the figure
  the app had before it read page-first.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path

from core.config import DshConfig
from stores.replay import LazyReplayStore
from tests.benchmarks._common import Row, Settings, median
from tests.replays.corpus import large_log_lines
from tui.app.app import DshApp
from tui.app.svg import render_svg
from tui.shared.replay import open_replay, replay_runtime


async def _replay_svg(path: Path) -> tuple[float, float]:
    started = time.perf_counter()
    store = await open_replay(str(path))
    loaded = time.perf_counter() - started
    runtime = replay_runtime(DshConfig(database=path.with_suffix(".never")), store)
    await render_svg(runtime, size=(120, 40))
    return loaded, time.perf_counter() - started


async def _replay_app(path: Path) -> tuple[float, float]:
    """Until the newest page is drawn; and until the background check is done."""
    started = time.perf_counter()
    store = await open_replay(str(path), lazy=True)
    assert isinstance(store, LazyReplayStore)
    runtime = replay_runtime(DshConfig(database=path.with_suffix(".never")), store)
    app = DshApp(runtime, cursor_blink=False, keep_drafts=False)
    async with app.run_test(size=(120, 40), headless=True):
        transcript = app.transcript
        deadline = started + 60
        while not (
            app.current_id is not None
            and transcript.item_widgets
            and transcript.item_widgets[-1].is_mounted
        ):
            if time.perf_counter() > deadline:
                raise AssertionError("the newest page was not drawn in time")
            await asyncio.sleep(0.001)
        painted = asyncio.Event()  # laid out and drawn: the screen's next refresh
        app.call_after_refresh(painted.set)
        await asyncio.wait_for(painted.wait(), 60)
        drawn = time.perf_counter() - started
        await asyncio.wait_for(store.wait_loaded(), 120)
        checked = time.perf_counter() - started
    return drawn, checked


def _floor(path: Path) -> float:
    started = time.perf_counter()
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            json.loads(line)
    return time.perf_counter() - started


async def run_workload(settings: Settings) -> list[Row]:
    count = 10_000 if settings.quick else 100_000
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "large.jsonl"
        text = "".join(line + "\n" for line in large_log_lines(count))
        await asyncio.to_thread(path.write_text, text, "utf-8")
        drawn, checked, loads, svgs, floors = [], [], [], [], []
        for _ in range(settings.reps(3)):
            page, whole = await _replay_app(path)
            drawn.append(page)
            checked.append(whole)
            loaded, total = await _replay_svg(path)
            loads.append(loaded)
            svgs.append(total)
            floors.append(await asyncio.to_thread(_floor, path))
    app_t, svg_t, floor = median(drawn), median(svgs), median(floors)
    return [
        Row(
            "replay: newest page drawn (the app)",
            f"{count:,} events",
            app_t,
            "s",
            "< 1 s",
            app_t < 1.0,
            baseline=floor,
            ratio=app_t / floor,
            note=(
                f"the whole file checked in the background by {median(checked):.2f} s; "
                "baseline: json.loads of every line"
            ),
            samples=drawn,
            baseline_samples=floors,
        ),
        Row(
            "replay --svg: whole file checked, then drawn",
            f"{count:,} events",
            svg_t,
            "s",
            "(before: the app did this)",
            None,
            baseline=floor,
            ratio=svg_t / floor,
            note=f"loading and checking the log {median(loads):.2f} s",
            samples=svgs,
            baseline_samples=floors,
        ),
    ]
