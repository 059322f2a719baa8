"""Workload 1: projection + retention (SPEC §4.6, §4.7).

Ours (``project_surface`` + ``retain_source``: the steps ``prepare`` runs per source, on UTF-8)
against the obvious implementation that re-serialises the whole source object after
every drop/shorten step, on the same input, with byte-identical outputs asserted; then
ours alone on large sources to show linear growth.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from core.log import (
    ASSISTANT_MESSAGE,
    STEERING_MESSAGE,
    USER_MESSAGE,
    Event,
    is_compact_checkpoint_source,
    message_text,
)
from core.references import (
    RetainedSource,
    omitted_marker,
    project_surface,
    retain_source,
    stringify_tag_safe_json,
)
from tests.benchmarks._common import Row, Settings, median, time_sync
from tests.benchmarks._data import as_events, conversation
from tests.references.naive_retention import NaiveItem, nbytes
from tests.references.naive_retention import naive_retain as naive_retain_items

BUDGET = 65_536
SESSION = {"session_id": "bench-source", "label": "Bench source", "cwd": "/home/dev/bench"}
CAPTURED = 123_456


def ours(events: Sequence[Event]) -> RetainedSource:
    return retain_source(
        **SESSION,
        captured_through_seq=CAPTURED,
        messages=project_surface(events),
        max_bytes=BUDGET,
    )


# --------------------------------------------------------------------------- the baseline


def naive_project(events: Sequence[Event]) -> list[NaiveItem]:
    """SPEC §4.6, read literally."""
    out: list[NaiveItem] = []
    for event in events:
        if event.surface_op is None:
            continue
        data: Mapping[str, Any] = event.data
        checkpoint = False
        if event.type == USER_MESSAGE:
            message = data
            source = message.get("source") or {}
            checkpoint = is_compact_checkpoint_source(source)
            if source.get("kind") != "user" and not checkpoint:
                continue
            role = "user"
        elif event.type == STEERING_MESSAGE:
            message = data["message"]
            if (message.get("source") or {}).get("kind") != "user":
                continue
            role = "user"
        elif event.type == ASSISTANT_MESSAGE:
            message, role = data["message"], "assistant"
        else:
            continue
        text = message_text(message)
        if text:
            out.append(NaiveItem(role, text, text, checkpoint))
    return out


def naive_truncate(text: str, target: int) -> tuple[str, int]:
    """Head/tail truncation: try every kept size ``r`` from ``target`` down."""
    data = text.encode("utf-8", "surrogatepass")
    total = len(data)
    if total <= target:
        return text, 0
    for r in range(target, -1, -1):
        head = (r + 1) // 2
        while head > 0 and data[head] & 0xC0 == 0x80:
            head -= 1
        tail = total - r // 2
        while tail < total and data[tail] & 0xC0 == 0x80:
            tail += 1
        omitted = tail - head
        candidate = data[:head] + data[tail:] + omitted_marker(omitted).encode()
        if len(candidate) <= target:
            return candidate.decode("utf-8", "surrogatepass"), omitted
    return "", total


def naive_retain(events: Sequence[Event]) -> tuple[dict[str, Any], tuple[int, int, int, int]]:
    """The quadratic way: serialise the whole source object after every step."""
    header = {
        "sessionId": SESSION["session_id"],
        "label": SESSION["label"],
        "cwd": SESSION["cwd"],
        "capturedThroughSeq": CAPTURED,
    }
    return naive_retain_items(naive_project(events), BUDGET, header, naive_truncate)


def _check_identical(
    result: RetainedSource, expected: tuple[dict[str, Any], tuple[int, ...]]
) -> None:
    ours_json = stringify_tag_safe_json(result.source)
    theirs_json = stringify_tag_safe_json(expected[0])
    if ours_json != theirs_json:
        raise AssertionError("retention output differs from the naive baseline (a bug)")
    s = result.stats
    got = (s.original_messages, s.retained_messages, s.omitted_messages, s.omitted_bytes)
    if got != expected[1]:
        raise AssertionError(f"retention stats {got} differ from the baseline's {expected[1]}")
    if nbytes(ours_json) > BUDGET:
        raise AssertionError("retention output exceeds the budget")


# --------------------------------------------------------------------------- workload


def run_workload(settings: Settings) -> list[Row]:
    rows: list[Row] = []
    compare_sizes = (300, 1_000) if settings.quick else (1_000, 3_000)
    for n in compare_sizes:
        # Mixed sizes up to 20,000 characters; the multi-megabyte ones are left to the
        # scale runs (the baseline would spend minutes re-serialising them).
        events = as_events(conversation(n, seed=n, big_every=10**9))
        ours_t, result = time_sync(partial(ours, events), settings.reps(7, 3))
        base_t, expected = time_sync(partial(naive_retain, events), settings.reps(3))
        _check_identical(result, expected)
        speedup = median(base_t) / median(ours_t)
        rows.append(
            Row(
                "retention vs naive",
                f"{n:,} msgs",
                median(ours_t),
                "s",
                ">= 300x faster" if n == compare_sizes[-1] else "(identical output)",
                speedup >= 300 if n == compare_sizes[-1] else None,
                baseline=median(base_t),
                ratio=speedup,
                note=(
                    f"speedup {speedup:,.0f}x; output byte-identical; "
                    f"{result.stats.retained_messages} of {result.stats.original_messages} kept"
                ),
                samples=ours_t,
                baseline_samples=base_t,
            )
        )

    scale_sizes = (10_000, 20_000, 40_000) if settings.quick else (50_000, 100_000, 200_000)
    largest = conversation(scale_sizes[-1], seed=7)  # smaller sizes are its prefixes
    sources = {n: as_events(largest[:n]) for n in scale_sizes}
    del largest
    scale_t: dict[int, list[float]] = {n: [] for n in scale_sizes}
    results: dict[int, RetainedSource] = {}
    # Interleaved repetitions: drift on a noisy machine hits every size alike.
    for _ in range(settings.reps(5, 3)):
        for n in scale_sizes:
            samples, results[n] = time_sync(partial(ours, sources[n]), 1)
            scale_t[n] += samples
    previous: float | None = None
    for n in scale_sizes:
        t = median(scale_t[n])
        growth = None if previous is None else t / previous
        text_mb = sum(nbytes(m.text) for m in project_surface(sources[n])) / 1e6
        rows.append(
            Row(
                "retention scale",
                f"{n:,} msgs",
                t,
                "s",
                "x2 msgs -> <= x2.2 time",
                None if growth is None else growth <= 2.2,
                ratio=growth,
                note=(
                    f"{text_mb:,.0f} MB of projected text, "
                    f"{results[n].stats.retained_messages} kept"
                    + ("" if growth is None else f"; time x{growth:.2f} vs half the messages")
                ),
                samples=scale_t[n],
            )
        )
        previous = t
    return rows
