"""The ``llm`` workload's measuring: commands timed as subprocesses in rotating order,
in-process searches interleaved (dsh on SQLite, llm's search layer and raw FTS5 in the
peer's process, dsh on PostgreSQL as a member), and the databases' sizes."""

from __future__ import annotations

import itertools
import sqlite3
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from core.store import SessionStore
from tests.benchmarks._llm_corpus import QUERIES
from tests.benchmarks._llm_peer import SearchServer, command_seconds

LIMIT = 20
"""Hits asked of every search: ``search_messages(limit=20)``, ``dsh search`` (its default),
``merged_log_rows(count=20)`` and ``llm logs -q … -n 20``, ``LIMIT 20`` of raw FTS5."""


@dataclass(frozen=True)
class Command:
    name: str
    argv: list[str]
    env: dict[str, str]


def time_commands(commands: Sequence[Command], reps: int) -> dict[str, list[float]]:
    """Wall seconds of each command ``reps`` times, in rounds whose order rotates (so the
    machine's noise falls on all alike), after one warm run of each (bytecode written,
    files in the page cache)."""
    for command in commands:
        command_seconds(command.argv, command.env)
    samples: dict[str, list[float]] = {c.name: [] for c in commands}
    n = len(commands)
    for r in range(reps):
        for i in itertools.islice(itertools.cycle(range(n)), r % n, r % n + n):
            command = commands[i]
            samples[command.name].append(command_seconds(command.argv, command.env))
    return samples


@dataclass
class QueryTimes:
    label: str
    query: str
    dsh: list[float] = field(default_factory=list)
    llm: list[float] = field(default_factory=list)  # merged_log_rows
    raw: list[float] = field(default_factory=list)  # raw FTS5
    pg: list[float] = field(default_factory=list)
    dsh_hits: int = 0
    llm_hits: int = 0
    raw_hits: int = 0
    pg_hits: int = 0


async def time_searches(
    store: SessionStore, server: SearchServer, pg: SessionStore | None, reps: int
) -> list[QueryTimes]:
    """Each query of ``QUERIES``: one warm call of each path, then ``reps`` rounds of one
    call each, dsh and llm alternating which goes first."""
    results = []
    for label, query in QUERIES:
        times = QueryTimes(label, query)
        times.dsh_hits = len(await store.search_messages(query, limit=LIMIT))
        answer = server.ask(query, LIMIT, 1)
        times.llm_hits, times.raw_hits = answer["merged_hits"], answer["raw_hits"]
        if pg is not None:
            times.pg_hits = len(await pg.search_messages(query, limit=LIMIT))
        for r in range(reps):
            for side in ("dsh", "llm") if r % 2 == 0 else ("llm", "dsh"):
                if side == "dsh":
                    started = time.perf_counter()
                    await store.search_messages(query, limit=LIMIT)
                    times.dsh.append(time.perf_counter() - started)
                    if pg is not None:
                        started = time.perf_counter()
                        await pg.search_messages(query, limit=LIMIT)
                        times.pg.append(time.perf_counter() - started)
                else:
                    answer = server.ask(query, LIMIT, 1)
                    times.llm += answer["merged"]
                    times.raw += answer["raw"]
        results.append(times)
    return results


def file_bytes(path: Path) -> int:
    """The database file with its WAL, if one is left."""
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def index_bytes(path: Path, prefixes: tuple[str, ...]) -> int:
    """Bytes of the tables and indexes whose names start with ``prefixes`` (``dbstat``)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
    finally:
        conn.close()
    return sum(size for name, size in rows if name.startswith(prefixes))


DSH_INDEX = ("search_", "sqlite_autoindex_search", "short_grams")
LLM_INDEX = ("turn_search", "sqlite_autoindex_turn_search", "idx_turn_search")


def median(values: list[float]) -> float:
    return statistics.median(values)
