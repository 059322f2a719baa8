"""Workload 4: sustained streaming of chunk events through the engine into SQLite.

A scripted provider yields its ``TextDelta``s as fast as it can (it never waits, the worst
case for the event loop: the engine's own awaits are the only chances to run anything
else). A ticker task sleeping 5 ms at a time records how late it wakes: the longest
pause the UI's event loop would see.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from core.engine import ChatSession, ReplyDelta, ReplyFinished
from core.log import ASSISTANT_CHUNK, USER_MESSAGE, user_message
from core.providers.base import Finish, ProviderMessage, StreamEvent, TextDelta, Usage
from core.references import SessionReferenceService
from stores import SessionQuery, open_store
from tests.benchmarks._common import TICK, Row, Settings, loop_ticker, median


class ScriptedProvider:
    """Yields ``count`` small text deltas without ever waiting."""

    name = "scripted"
    model = "bench-1"

    def __init__(self, count: int) -> None:
        self.count = count

    async def stream(
        self, messages: Sequence[ProviderMessage], *, cancel: asyncio.Event | None = None
    ) -> AsyncIterator[StreamEvent]:
        for i in range(self.count):
            yield TextDelta(f"tok{i % 100} ")
        yield Usage({"completion_tokens": self.count})
        yield Finish("stop")

    async def aclose(self) -> None:
        return None


async def one_run(path: Path | str, count: int) -> tuple[float, float]:
    """Seconds to stream ``count`` deltas to a stored reply, and the longest loop stall
    (``path``: any store location, a SQLite file or a PostgreSQL URL)."""
    async with await open_store(path) as store:
        header = await store.create_session(cwd="/home/dev/bench")
        await store.append(
            header.id, USER_MESSAGE, user_message("Stream a lot."), surface_op="append"
        )
        query = SessionQuery(store)
        chat = ChatSession(
            store, query, SessionReferenceService(query), ScriptedProvider(count), header
        )
        stop = asyncio.Event()
        lateness: list[float] = []
        ticker = asyncio.create_task(loop_ticker(stop, lateness))
        await asyncio.sleep(TICK * 2)  # the ticker is running
        deltas = 0
        finished: ReplyFinished | None = None
        started = time.perf_counter()
        async for update in chat.reply():
            if isinstance(update, ReplyDelta):
                deltas += 1
            elif isinstance(update, ReplyFinished):
                finished = update
                break
        elapsed = time.perf_counter() - started
        stop.set()
        await ticker
        if deltas != count or finished is None or finished.status != "completed":
            raise AssertionError(f"streamed {deltas} of {count} deltas, finished={finished}")
        events = await store.read_events(header.id)
        chunks = sum(1 for e in events if e.type == ASSISTANT_CHUNK)
        if chunks != count:
            raise AssertionError(f"{chunks} chunk events stored, expected {count}")
        del events
        return elapsed, max(lateness, default=0.0)


async def run_workload(settings: Settings) -> list[Row]:
    count = 10_000 if settings.quick else 50_000
    rates: list[float] = []
    stalls: list[float] = []
    with tempfile.TemporaryDirectory(prefix="dsh-bench-") as tmp:
        for rep in range(settings.reps(5, 2)):
            elapsed, stall = await one_run(Path(tmp) / f"append-{rep}.sqlite3", count)
            rates.append(count / elapsed)
            stalls.append(stall)
    rate, stall = median(rates), median(stalls)
    return [
        Row(
            "append: chunk events/s",
            f"{count:,} chunks",
            rate,
            "ev/s",
            ">= 50,000 ev/s",
            rate >= 50_000,
            samples=rates,
        ),
        Row(
            "append: longest loop pause",
            f"{count:,} chunks",
            stall,
            "s",
            "<= 50 ms",
            stall <= 0.050,
            note=f"worst of all runs {max(stalls) * 1000:.1f} ms",
            samples=stalls,
        ),
    ]
