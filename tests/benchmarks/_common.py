"""Shared helpers: timing, result rows, the table."""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Settings:
    """Sizes and repetitions of one run (``--quick`` shrinks both)."""

    quick: bool

    def reps(self, full: int, quick: int = 1) -> int:
        return quick if self.quick else full


@dataclass
class Row:
    """One line of the table. ``ours``/``baseline`` are in ``unit``; ``ratio`` is
    ours / baseline (so below 1 means faster for times) unless stated in ``note``."""

    workload: str
    size: str
    ours: float
    unit: str
    target: str
    met: bool | None
    baseline: float | None = None
    ratio: float | None = None
    note: str = ""
    samples: list[float] = field(default_factory=list)
    baseline_samples: list[float] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def median(values: list[float]) -> float:
    return statistics.median(values)


def time_sync(fn: Callable[[], T], reps: int) -> tuple[list[float], T]:
    """Wall-clock seconds of ``reps`` calls (GC collected before each, not during)."""
    samples: list[float] = []
    result: T | None = None
    for _ in range(reps):
        gc.collect()
        started = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - started)
    assert result is not None
    return samples, result


async def time_async(fn: Callable[[], Awaitable[T]], reps: int) -> tuple[list[float], T]:
    samples: list[float] = []
    result: T | None = None
    for _ in range(reps):
        gc.collect()
        started = time.perf_counter()
        result = await fn()
        samples.append(time.perf_counter() - started)
    assert result is not None
    return samples, result


TICK = 0.005
"""How often ``loop_ticker`` wakes (seconds)."""


async def loop_ticker(stop: asyncio.Event, lateness: list[float]) -> None:
    """Sleep ``TICK`` at a time until ``stop``, recording how late each wake-up is: the
    longest lateness is the longest pause the event loop (the UI) saw meanwhile."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        expected = loop.time() + TICK
        await asyncio.sleep(TICK)
        lateness.append(loop.time() - expected)


def run(coro: Awaitable[T]) -> T:
    async def main() -> T:
        return await coro

    return asyncio.run(main())


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "s":
        return f"{value * 1000:,.1f} ms" if value < 10 else f"{value:,.2f} s"
    if unit == "MB":
        return f"{value:,.1f} MB"
    if unit in ("ev/s", "msg/s"):
        return f"{value:,.0f} {unit}"
    return f"{value:,.3g} {unit}"


def format_table(rows: list[Row]) -> str:
    header = ("workload", "size", "ours (median)", "baseline (median)", "ratio", "target", "met?")
    lines = [
        (
            row.workload,
            row.size,
            _fmt(row.ours, row.unit),
            _fmt(row.baseline, row.unit),
            "-" if row.ratio is None else f"{row.ratio:,.2f}x",
            row.target,
            "-" if row.met is None else ("yes" if row.met else "NO"),
        )
        for row in rows
    ]
    widths = [max(len(str(c)) for c in col) for col in zip(header, *lines, strict=False)]

    def line(cells: tuple[str, ...]) -> str:
        return " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    out = [line(header), "-+-".join("-" * w for w in widths)]
    out += [line(cells) for cells in lines]
    notes = [f"  {row.workload} {row.size}: {row.note}" for row in rows if row.note]
    if notes:
        out += ["", "notes:", *notes]
    return "\n".join(out)
