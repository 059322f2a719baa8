"""The ``team_search`` workload's measuring: the three paths (dsh, old RLS, floor) timed
interleaved, their plans in one line each, the sanity of their answers."""

from __future__ import annotations

import itertools
import json
import resource
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from core.search import RANK_WINDOW, like_pattern
from core.store import SessionStore
from tests.benchmarks._common import Row, median
from tests.benchmarks._team_search_team import (
    ABSENT,
    RARE,
    SEARCHER,
    SESSIONS_PER_MEMBER,
    SHARED_SESSIONS,
    SHARED_WITH,
    WORKLOAD,
)

FLOOR_SLACK = 0.005
"""What a store's search costs beyond its statement (a transaction, the ids, the ranking in
a thread): the floor's target allows this much over it when twice the floor is less."""
OLD_SQL = (
    "SELECT s.id, m.seq, m.text FROM dsh_search_rls AS m "
    "JOIN dsh_sessions AS s ON s.key = m.session_key WHERE {likes} "
    f"ORDER BY m.id DESC LIMIT {RANK_WINDOW}"
)
FLOOR_SQL = (
    "SELECT m.session_key, m.seq, m.text FROM dsh_search AS m WHERE {likes} "
    f"ORDER BY m.id DESC LIMIT {RANK_WINDOW}"
)
FIND_SQL = "SELECT session_key, seq, text FROM dsh_search_find($1, $2, $3)"


# ---------------------------------------------------------------- measuring


def _likes(terms: Sequence[str]) -> str:
    return " AND ".join(f"m.text ILIKE ${i + 1} ESCAPE '\\'" for i in range(len(terms)))


def _p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[8] if len(values) >= 3 else max(values)


async def _interleaved(fns: Sequence[Callable[[], Awaitable[Any]]], reps: int) -> list[list[float]]:
    """Samples of each, in rounds (the order rotating), after one warm call of each."""
    for fn in fns:
        await fn()
    samples: list[list[float]] = [[] for _ in fns]
    for r in range(reps):
        for i in itertools.islice(itertools.cycle(range(len(fns))), r, r + len(fns)):
            started = time.perf_counter()
            await fns[i]()
            samples[i].append(time.perf_counter() - started)
    return samples


def _walk(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", ()):
        yield from _walk(child)


def plan_line(doc: dict[str, Any], elapsed: float | None = None) -> str:
    """One line of an ``EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)`` document: its scans
    (rows out and rows a filter or recheck removed, summed over parallel workers), the
    workers launched, buffers, time, JIT."""
    top = doc["Plan"]
    scans = []
    workers = 0
    for node in _walk(top):
        kind = node["Node Type"]
        workers += node.get("Workers Launched", 0)
        if "Scan" not in kind or kind == "Function Scan":
            continue
        loops = node.get("Actual Loops") or 1
        target = node.get("Index Name") or node.get("Relation Name") or ""
        rows = round(node.get("Actual Rows", 0) * loops)
        removed = round(
            (node.get("Rows Removed by Filter", 0) + node.get("Rows Removed by Index Recheck", 0))
            * loops
        )
        scans.append(
            ("Parallel " if node.get("Parallel Aware") else "")
            + f"{kind} on {target} ({rows:,} rows"
            + (f", {removed:,} removed" if removed else "")
            + ")"
        )
    took = doc.get("Execution Time", elapsed)
    jit = doc.get("JIT")
    jit_text = (
        f"JIT {jit['Timing']['Total']:.0f} ms"
        if isinstance(jit, dict) and "Timing" in jit
        else "no JIT"
    )
    return (
        "; ".join(scans)
        + (f"; {workers} parallel workers" if workers else "")
        + f"; buffers hit {top.get('Shared Hit Blocks', 0):,} read {top.get('Shared Read Blocks', 0):,}"
        + (f"; {took:.1f} ms" if took is not None else "")
        + f"; {jit_text}"
    )


async def explain_find(root: asyncpg.Connection, patterns: list[str], flags: list[bool]) -> str:
    """The plan of ``dsh_search_find``'s inner statement run for ``SEARCHER``, logged by
    ``auto_explain`` (a module only a superuser loads) and caught as a notice."""
    caught: list[str] = []

    def listener(_conn: Any, msg: Any) -> None:
        caught.append(str(msg.message))

    root.add_log_listener(listener)
    try:
        await root.execute(
            "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; "
            "SET auto_explain.log_nested_statements = on; SET auto_explain.log_analyze = on; "
            "SET auto_explain.log_buffers = on; SET auto_explain.log_timing = on; "
            "SET auto_explain.log_format = json; SET auto_explain.log_level = notice"
        )
        await root.execute(f"SET SESSION AUTHORIZATION {SEARCHER}")
        try:
            await root.fetch(FIND_SQL, patterns, flags, RANK_WINDOW)
        finally:
            await root.execute(
                "RESET SESSION AUTHORIZATION; SET auto_explain.log_min_duration = -1"
            )
    finally:
        root.remove_log_listener(listener)
    for text in caught:
        if "plan:" not in text:
            continue
        doc = json.loads(text[text.index("{") :])
        if "FROM dsh_search AS m" in doc.get("Query Text", ""):
            duration = float(text.split("duration:")[1].split("ms")[0])
            return plan_line(doc, duration)
    raise AssertionError(f"auto_explain logged no plan of the inner statement: {caught!r}")


async def explain_sql(conn: asyncpg.Connection, sql: str, args: Sequence[Any]) -> str:
    raw = await conn.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", *args)
    doc = json.loads(raw)[0]
    return plan_line(doc)


@dataclass
class Paths:
    """The connections and stores each path runs on."""

    store: SessionStore
    member: asyncpg.Connection  # SEARCHER, plain SQL
    root: asyncpg.Connection  # the superuser

    def dsh(self, query: str) -> Callable[[], Awaitable[Any]]:
        return lambda: self.store.search_messages(query)

    def old(self, query: str) -> Callable[[], Awaitable[Any]]:
        terms = query.split()
        sql = OLD_SQL.format(likes=_likes(terms))
        params = [like_pattern(t) for t in terms]
        return lambda: self.member.fetch(sql, *params)

    def floor(self, query: str) -> Callable[[], Awaitable[Any]]:
        terms = query.split()
        sql = FLOOR_SQL.format(likes=_likes(terms))
        params = [like_pattern(t) for t in terms]
        return lambda: self.root.fetch(sql, *params)

    def find(self, query: str) -> Callable[[], Awaitable[Any]]:
        terms = query.split()
        params = [like_pattern(t) for t in terms]
        flags = [False] * len(terms)
        return lambda: self.member.fetch(FIND_SQL, params, flags, RANK_WINDOW)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _ms(value: float) -> str:
    return f"{value * 1000:,.1f} ms"


async def _measure(
    paths: Paths, label: str, query: str, size: str, reps: int, *, explain: bool
) -> tuple[list[Row], dict[str, float]]:
    """The rows of one query at one size: dsh against the old RLS path, and the floor."""
    dsh, old, floor, find = await _interleaved(
        [paths.dsh(query), paths.old(query), paths.floor(query), paths.find(query)], reps
    )
    hits = len(await paths.store.search_messages(query))
    matched = len(await paths.old(query)())
    notes = [
        f"'{query}': {hits} hits ({matched} matching rows readable)",
        f"p90 dsh {_ms(_p90(dsh))}, old {_ms(_p90(old))}, floor {_ms(_p90(floor))}",
        f"dsh_search_find alone {_ms(median(find))}",
    ]
    if explain:
        terms = query.split()
        params = [like_pattern(t) for t in terms]
        new_plan = await explain_find(paths.root, params, [False] * len(terms))
        old_plan = await explain_sql(paths.member, OLD_SQL.format(likes=_likes(terms)), params)
        floor_plan = await explain_sql(paths.root, FLOOR_SQL.format(likes=_likes(terms)), params)
        notes += [f"new plan: {new_plan}", f"old plan: {old_plan}", f"floor plan: {floor_plan}"]
    vs_old = median(dsh) / median(old)
    vs_floor = median(dsh) / median(floor)
    near_floor = median(dsh) <= max(2 * median(floor), median(floor) + FLOOR_SLACK)
    rows = [
        Row(
            WORKLOAD,
            f"{label}, dsh vs old RLS @ {size}",
            median(dsh),
            "s",
            "below the old RLS path",
            vs_old < 1.0,
            baseline=median(old),
            ratio=vs_old,
            note="; ".join(notes),
            samples=dsh,
            baseline_samples=old,
        ),
        Row(
            WORKLOAD,
            f"{label}, dsh vs floor @ {size}",
            median(dsh),
            "s",
            "within 2x of the floor (or 5 ms)",
            near_floor,
            baseline=median(floor),
            ratio=vs_floor,
            samples=dsh,
            baseline_samples=floor,
        ),
    ]
    return rows, {"dsh": median(dsh), "old": median(old)}


async def _sanity(paths: Paths, root: asyncpg.Connection, per_session: int) -> None:
    """The listing, a read and a search through the store, as the member (untimed)."""
    store = paths.store
    readable = SESSIONS_PER_MEMBER + SHARED_SESSIONS * SHARED_WITH
    headers = await store.list_headers()
    assert len(headers) == readable, f"m03 lists {len(headers)} sessions, not {readable}"
    shared = next(h for h in headers if h.owner != SEARCHER)
    events = await store.read_events(shared.id)
    assert len(events) == per_session and events[-1].seq == per_session - 1
    assert [e.data for e in events[:2]] == [
        json.loads(r["data"])
        for r in await root.fetch(
            "SELECT data FROM dsh_events WHERE session_key = "
            "(SELECT key FROM dsh_sessions WHERE id = $1) AND seq < 2 ORDER BY seq",
            shared.id.encode(),
        )
    ]
    # The rare word's hits: exactly the readable messages holding it (at most 20).
    found = {(h.session_id, h.seq) for h in await store.search_messages(RARE, limit=RANK_WINDOW)}
    rows = await paths.member.fetch(OLD_SQL.format(likes=_likes([RARE])), like_pattern(RARE))
    assert found == {(bytes(r["id"]).decode(), r["seq"]) for r in rows}, "rare-word hits differ"
    assert await store.search_messages(ABSENT) == []
