"""Workload: the context meter of a long session (issue 32), as the app reads it.

* The first reading of a session with many replies (each stored with its chunk events):
  seconds, and the longest the event loop was held meanwhile (what a user feels as a
  freeze). Ours is ``tui.app.meter.measure_session`` as the app runs it (the cyclic GC
  paused, the next request counted in a thread); the baseline is ``core.usage.measure``
  awaited on the loop as it is.
* The reading after one more reply: ours continues from the last reading (only the new
  events are read); the baseline reads the whole log again.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

from core.config import DshConfig
from core.gcpause import gc_paused
from core.log import (
    ASSISTANT_MESSAGE,
    USER_MESSAGE,
    NewEvent,
    assistant_message,
    user_message,
)
from core.providers.offline import OfflineProvider
from core.usage import SessionUsage, measure
from stores import SqliteSessionStore
from tests.benchmarks._common import Row, Settings, median
from tui.app.meter import ReplyTally, measure_session
from tui.shared.runtime import open_runtime

T = TypeVar("T")

SESSION = "long"


def exchange(turn: int, chunks: int) -> list[NewEvent]:
    question = f"question {turn}: " + "words of the question " * 20
    answer = "a reply word " * chunks
    events = [NewEvent(USER_MESSAGE, user_message(question), "append")]
    events += [
        NewEvent(
            "assistant/chunk",
            {"turn": turn, "step": 0, "chunk": {"type": "text-delta", "index": i, "text": "a "}},
        )
        for i in range(chunks)
    ]
    events.append(
        NewEvent(
            ASSISTANT_MESSAGE,
            {
                "turn": turn,
                "step": 0,
                "message": assistant_message(answer, provider="offline", model="echo-1"),
                "usage": {"prompt_chars": 400 * turn, "completion_chars": len(answer)},
                "profile": "offline",
            },
            "append",
        )
    )
    return events


async def seed(store: SqliteSessionStore, turns: int, chunks: int) -> None:
    await store.create_session(SESSION)
    batch: list[NewEvent] = []
    for turn in range(1, turns + 1):
        batch += exchange(turn, chunks)
        if len(batch) > 20_000:
            await store.append_batch(SESSION, batch)
            batch = []
    if batch:
        await store.append_batch(SESSION, batch)


async def stalled(work: Awaitable[T]) -> tuple[T, float, float]:
    """``work``'s result, its seconds, and the longest the loop was held meanwhile."""
    loop = asyncio.get_running_loop()
    worst = 0.0
    done = False

    async def probe() -> None:
        nonlocal worst
        while not done:
            before = loop.time()
            await asyncio.sleep(0.002)
            worst = max(worst, loop.time() - before - 0.002)

    watcher = asyncio.ensure_future(probe())
    await asyncio.sleep(0.01)
    started = time.perf_counter()
    result = await work
    elapsed = time.perf_counter() - started
    done = True
    await watcher
    return result, elapsed, worst


async def run_workload(settings: Settings) -> list[Row]:
    turns = 2_000 if settings.quick else 10_000
    chunks = 20 if settings.quick else 60
    with tempfile.TemporaryDirectory(prefix="dsh-bench-") as tmp:
        path = Path(tmp) / "meter.sqlite3"
        async with await SqliteSessionStore.open(path) as store:
            await seed(store, turns, chunks)
            config = DshConfig(database=path)
            async with open_runtime(config, store=store, provider=OfflineProvider()) as rt:
                chat = await rt.chat(SESSION)
                profiles = rt.config.profiles
                ours_first: list[float] = []
                ours_stall: list[float] = []
                base_first: list[float] = []
                base_stall: list[float] = []
                again: list[float] = []
                base_again: list[float] = []
                for _ in range(settings.reps(3, 1)):

                    async def ours() -> tuple[SessionUsage, ReplyTally]:
                        with gc_paused():  # as the app's worker runs it
                            return await measure_session(chat, profiles)

                    (_, tally), seconds, stall = await stalled(ours())
                    ours_first.append(seconds)
                    ours_stall.append(stall)
                    _, seconds, stall = await stalled(measure(chat, profiles))
                    base_first.append(seconds)
                    base_stall.append(stall)
                    await store.append_batch(SESSION, exchange(turns + 1, chunks))
                    started = time.perf_counter()
                    with gc_paused():
                        await measure_session(chat, profiles, tally)
                    again.append(time.perf_counter() - started)
                    started = time.perf_counter()
                    await measure(chat, profiles)
                    base_again.append(time.perf_counter() - started)
    events = turns * (chunks + 2)
    size = f"{turns:,} replies ({events:,} events)"
    stall, base = max(ours_stall), max(base_stall)
    return [
        Row(
            "Meter: first reading",
            size,
            median(ours_first),
            "s",
            "worst loop stall < 100 ms",
            stall < 0.1,
            baseline=median(base_first),
            ratio=median(ours_first) / median(base_first),
            note=(
                f"worst loop stall {stall * 1000:.0f} ms "
                f"(core.usage.measure on the loop: {base * 1000:.0f} ms)"
            ),
            samples=ours_first,
            baseline_samples=base_first,
        ),
        Row(
            "Meter: after one more reply",
            size,
            median(again),
            "s",
            "< 1/2 of a whole reading",
            median(again) < median(base_again) / 2,
            baseline=median(base_again),
            ratio=median(again) / median(base_again),
            note=(
                "continues from the last reading: only the new events are summed (what is left"
                " is reading the surface for the next request)"
            ),
            samples=again,
            baseline_samples=base_again,
        ),
    ]
