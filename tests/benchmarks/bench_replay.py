"""``dsh replay``: a log file of 100,000 events (10,000 with ``--quick``) to its newest page
drawn, target under 1 s; beside it the floor of reading and JSON-decoding every line."""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path

from core.config import DshConfig
from tests.benchmarks._common import Row, Settings, median
from tests.replays.corpus import large_log_lines
from tui.app.svg import render_svg
from tui.shared.replay import open_replay, replay_runtime


async def _replay(path: Path) -> tuple[float, float]:
    started = time.perf_counter()
    store = await open_replay(str(path))
    loaded = time.perf_counter() - started
    runtime = replay_runtime(DshConfig(database=path.with_suffix(".never")), store)
    await render_svg(runtime, size=(120, 40))
    return loaded, time.perf_counter() - started


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
        loads, totals, floors = [], [], []
        for _ in range(settings.reps(3)):
            loaded, total = await _replay(path)
            loads.append(loaded)
            totals.append(total)
            floors.append(await asyncio.to_thread(_floor, path))
    total, floor = median(totals), median(floors)
    return [
        Row(
            "replay: newest page drawn",
            f"{count:,} events",
            total,
            "s",
            "< 1 s",
            total < 1.0,
            baseline=floor,
            ratio=total / floor,
            note=f"loading and checking the log {median(loads):.2f} s; baseline: json.loads of every line",
            samples=totals,
            baseline_samples=floors,
        )
    ]
