"""Workload ``team_load`` (issue 34, point 3): N members of a team working at once on one
PostgreSQL server, each a separate OS process with its own login role and store
(``_load_user``): every few seconds a message with one session reference through the
engine, its reply streamed at 50 tokens/s by the offline model; one in four searches; all
follow the database twice a second.

The cluster is the benchmark's own (``tests.pgcluster.running_cluster``, with
``max_connections`` raised so that N = 100 members fit without a pooler). Each
configuration gets a new team schema: the first member's store migrates it (and owns the
tables), then N members start (``fork``), make their sessions, share their chat with the
next member and wait; all start at the same moment and run ``duration`` seconds.

**Measured**, over the members' whole run:

* send → first token: from ``ChatSession.send`` to the first delta shown (reading the
  referenced session, storing the message and its snapshot, the reply lease, reading the
  surface), p50 and p99;
* events stored per second (``dsh_events`` rows counted before and after, by the
  superuser);
* search: ``store.search_messages`` p50 and p99;
* follow lag: from a member's message committed (its append returned) to the follower
  of the next member first seeing its seq, p50 and p99 (twice-a-second polling alone
  makes it 0.25 s on average);
* server connections: ``pg_stat_activity``'s client backends of the database, sampled
  every 0.2 s, peak and mean; the samples' wait events, the most frequent first.

Run ``python -m tests.benchmarks --only team_load`` (N = 10, 50, 100, 25 s each), or
``python -m tests.benchmarks.bench_team_load --users 10 50 --seconds 20 --pooler no`` for
other sizes (``--pooler``: ``no``, ``yes`` or ``both``; the default ``both`` when PgBouncer
and ``tests.pgbouncer`` are present). The environment variables ``DSH_LOAD_USERS``
("10,50"), ``DSH_LOAD_SECONDS``, ``DSH_LOAD_POOLER`` and ``DSH_LOAD_CHUNK_FLUSH`` do the
same for ``--only``. ``--chunk-flush 0.05`` writes a reply's chunks as often as before
issue 34 (the engine's default; the PostgreSQL store now asks for 0.25 s), for comparing;
``--poll`` makes direct members follow by polling the change counter (as behind a pooler:
``PostgresLimits(pooler=True)``) instead of LISTEN. "heard" counts the moves of the
members' change tokens (notifications heard, or counter moves seen by polling).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from stores.postgres import PostgresSessionStore
from tests.benchmarks._common import Row, Settings
from tests.benchmarks._load_user import UserResult, UserSpec, role, user_process

WORKLOAD = "team_load"
USERS = (10, 50, 100)
SECONDS = 25.0
SEND_EVERY = 4.0  # seconds between a member's sends, on average
TOKENS_PER_S = 50.0
SEARCH_EVERY = 3.0  # seconds between a searcher's searches, on average
SEARCHERS_ONE_IN = 4
SAMPLE_EVERY = 0.2  # pg_stat_activity
MAX_CONNECTIONS = 400  # three per member (pool of up to two, one LISTEN) for N = 100, and spare
POOL_SIZE = 2  # PgBouncer's server connections per user (a member's store needs one at a time)
START_TIMEOUT = 180.0
CLUSTER_SETTINGS = (
    f"max_connections={MAX_CONNECTIONS}",
    "shared_buffers=128MB",
    "shared_preload_libraries=pg_stat_statements",
    "pg_stat_statements.track=all",
)


@dataclass
class Config:
    users: int
    pooler: bool
    seconds: float
    chunk_flush: float | None = None
    poll: bool = False
    server_conns: int = 0  # PgBouncer's max_db_connections (0: no cap)


@dataclass
class Outcome:
    config: Config
    results: list[UserResult]
    events: int
    elapsed: float
    connections: list[int] = field(default_factory=list)
    waits: collections.Counter[str] = field(default_factory=collections.Counter)
    statements: list[tuple[str, int, float]] = field(default_factory=list)
    server_cpu: float = 0.0  # CPU seconds of the server (and PgBouncer) during the run
    machine: float = 0.0  # the whole machine's busy share during the run (0..1)

    def client_cpu(self) -> float:
        return sum(r.cpu for r in self.results)

    def heard(self) -> int:
        return sum(r.heard for r in self.results)

    def first_token(self) -> list[float]:
        return [v for r in self.results for v in r.first_token]

    def search(self) -> list[float]:
        return [v for r in self.results for v in r.search]

    def follow_lag(self) -> list[float]:
        """For every message committed, how long until a follower saw its seq (or a later
        one) in that session; messages nobody saw before the end are left out."""
        seen: dict[str, list[tuple[int, float]]] = collections.defaultdict(list)
        for r in self.results:
            for session, seq, t in r.seen:
                seen[session].append((seq, t))
        lags: list[float] = []
        for r in self.results:
            for session, seq, t in r.commits:
                later = [s_t for s_seq, s_t in seen.get(session, ()) if s_seq >= seq]
                if later:
                    lags.append(max(0.0, min(later) - t))
        return lags

    def errors(self) -> list[str]:
        return [e for r in self.results for e in r.errors]


def pct(values: Sequence[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))]


# ---------------------------------------------------------------- the servers


@contextlib.contextmanager
def _cluster() -> Iterator[Any]:
    from tests.pgcluster import find_binaries, running_cluster

    bindir = find_binaries()
    if bindir is None:
        raise SystemExit("bench team_load: no PostgreSQL binaries")
    with running_cluster(bindir, CLUSTER_SETTINGS) as cluster:
        yield cluster


def pooler_available() -> bool:
    try:
        from tests.pgbouncer import find_pgbouncer
    except ImportError:
        return False
    return find_pgbouncer() is not None


@contextlib.contextmanager
def _bouncer(cluster: Any, users: int, server_conns: int) -> Iterator[Any]:
    """PgBouncer for the members: a pool per role (PgBouncer pools by user and database),
    ``server_conns`` server connections for all of them together (0: one per member)."""
    from tests.pgbouncer import running_pgbouncer

    with running_pgbouncer(
        cluster,
        [role(i) for i in range(users)],
        pool_size=POOL_SIZE,
        max_db_connections=server_conns,
    ) as b:
        yield b


# ---------------------------------------------------------------- CPU use

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()  # fields from the 3rd (state) on


def server_cpu(cluster: Any, extra: Sequence[int] = ()) -> float:
    """CPU seconds used so far by the cluster's postmaster's children (and ``extra``
    processes, such as PgBouncer): the backends, the writer, the WAL writer…"""
    try:
        postmaster = int((cluster.root / "data" / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        if fields is None:
            continue
        if int(fields[1]) == postmaster or int(entry.name) in extra:
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / _TICK


def machine_busy() -> tuple[float, float]:
    """(busy, all) CPU seconds of the whole machine so far (/proc/stat)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = values[3] + values[4]
    return (sum(values) - idle) / _TICK, sum(values) / _TICK


# ---------------------------------------------------------------- one configuration


async def _count_events(root: asyncpg.Connection, schema: str) -> int:
    return int(await root.fetchval(f"SELECT count(*) FROM {schema}.dsh_events"))


async def _sample(
    root: asyncpg.Connection, outcome: Outcome, until: float, stop: asyncio.Event
) -> None:
    """Connections and wait events of the members' backends, every ``SAMPLE_EVERY``."""
    while time.time() < until and not stop.is_set():
        rows = await root.fetch(
            "SELECT state, wait_event_type, wait_event FROM pg_stat_activity "
            "WHERE datname = current_database() AND backend_type = 'client backend' "
            "AND pid <> pg_backend_pid()"
        )
        outcome.connections.append(len(rows))
        for state, kind, event in rows:
            if state == "active":
                outcome.waits[f"{kind or 'CPU'}:{event or '-'}"] += 1
        await asyncio.sleep(SAMPLE_EVERY)


async def _statements(root: asyncpg.Connection) -> list[tuple[str, int, float]]:
    rows = await root.fetch(
        "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 90) AS q, sum(calls), "
        "sum(total_exec_time) AS t FROM pg_stat_statements GROUP BY q ORDER BY t DESC LIMIT 8"
    )
    return [(str(q), int(c), float(t)) for q, c, t in rows]


def run_config(cluster: Any, config: Config, bouncer: Any = None) -> Outcome:
    """Start N member processes on a new team schema, run them, gather their figures."""
    schema = cluster.team_schema()
    site = bouncer if bouncer is not None else cluster

    def url(i: int) -> str:
        return str(site.team_url(role(i), schema))

    async def migrate() -> None:
        store = await PostgresSessionStore.open(cluster.team_url(role(0), schema))
        await store.close()

    asyncio.run(migrate())
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Queue()
    out = ctx.Queue()
    start_at = ctx.Value("d", 0.0)
    go = ctx.Event()
    procs = [
        ctx.Process(
            target=user_process,
            args=(
                UserSpec(
                    index=i,
                    users=config.users,
                    url=url(i),
                    send_every=SEND_EVERY,
                    tokens_per_s=TOKENS_PER_S,
                    searcher=i % SEARCHERS_ONE_IN == 0,
                    search_every=SEARCH_EVERY,
                    seed=1000 + i,
                    chunk_flush=config.chunk_flush,
                    poll=config.poll,
                ),
                ready,
                go,
                start_at,
                config.seconds,
                out,
            ),
            daemon=True,
        )
        for i in range(config.users)
    ]
    for p in procs:
        p.start()
    try:
        return asyncio.run(
            _drive(
                cluster,
                schema,
                config,
                ready,
                out,
                go,
                start_at,
                None if bouncer is None else bouncer.pid,
            )
        )
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
                p.join()


async def _drive(
    cluster: Any,
    schema: str,
    config: Config,
    ready: Any,
    out: Any,
    go: Any,
    start_at: Any,
    bouncer_pid: int | None,
) -> Outcome:
    loop = asyncio.get_running_loop()
    seen: set[int] = set()
    deadline = time.time() + START_TIMEOUT
    while len(seen) < config.users:
        if time.time() > deadline:
            raise RuntimeError(f"only {len(seen)} of {config.users} members started")
        seen.add(await loop.run_in_executor(None, ready.get, True, START_TIMEOUT))
    root = await asyncpg.connect(cluster.url())
    try:
        await root.execute("SELECT pg_stat_statements_reset()")
        before = await _count_events(root, schema)
        extra = [bouncer_pid] if bouncer_pid else []
        cpu0, (busy0, all0) = server_cpu(cluster, extra), machine_busy()
        begin = time.time() + 1.0
        start_at.value = begin
        go.set()
        outcome = Outcome(config, [], 0, 0.0)
        await asyncio.sleep(max(0.0, begin - time.time()))
        stop = asyncio.Event()
        sampler = asyncio.ensure_future(_sample(root, outcome, begin + config.seconds, stop))
        await asyncio.sleep(max(0.0, begin + config.seconds - time.time()))
        after = await _count_events(root, schema)
        outcome.elapsed = time.time() - begin
        busy1, all1 = machine_busy()
        outcome.server_cpu = server_cpu(cluster, extra) - cpu0
        outcome.machine = (busy1 - busy0) / max(all1 - all0, 1e-9)
        outcome.events = after - before
        stop.set()
        await sampler
        for _ in range(config.users):
            outcome.results.append(await loop.run_in_executor(None, out.get, True, 120))
        outcome.statements = await _statements(root)
    finally:
        await root.close()
    return outcome


# ---------------------------------------------------------------- reporting


def _ms(v: float) -> str:
    return f"{v * 1000:,.0f} ms"


def summary_line(o: Outcome) -> str:
    ft, se, lag = o.first_token(), o.search(), o.follow_lag()
    conns = o.connections or [0]
    return (
        f"N={o.config.users:>3} {'pgbouncer' if o.config.pooler else 'direct   '} "
        f"chunks {o.config.chunk_flush or 'store'}{' poll' if o.config.poll else ''}"
        f"{f' cap {o.config.server_conns}' if o.config.server_conns else ''} | "
        f"first token p50 {_ms(pct(ft, 50))} p99 {_ms(pct(ft, 99))} ({len(ft)} sends) | "
        f"{o.events / o.elapsed:,.0f} ev/s | "
        f"search p50 {_ms(pct(se, 50))} p99 {_ms(pct(se, 99))} ({len(se)}) | "
        f"follow lag p50 {_ms(pct(lag, 50))} p99 {_ms(pct(lag, 99))} ({len(lag)}) | "
        f"connections peak {max(conns)} mean {statistics.fmean(conns):.0f} | "
        f"CPU s/s clients {o.client_cpu() / o.elapsed:.2f} server {o.server_cpu / o.elapsed:.2f} "
        f"machine {100 * o.machine:.0f}% | heard {o.heard() / o.elapsed:,.0f}/s | "
        f"errors {len(o.errors())}"
    )


def rows_of(o: Outcome) -> list[Row]:
    size = f"N={o.config.users}, {'PgBouncer' if o.config.pooler else 'direct'}"
    if o.config.chunk_flush is not None:
        size += f", chunks every {o.config.chunk_flush:g} s"
    if o.config.poll and not o.config.pooler:
        size += ", polling"
    if o.config.pooler and o.config.server_conns:
        size += f", {o.config.server_conns} server conns"
    ft, se, lag = o.first_token(), o.search(), o.follow_lag()
    conns = o.connections or [0]
    total = sum(o.waits.values()) or 1
    waits = ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in o.waits.most_common(5))
    errors = o.errors()
    return [
        Row(
            WORKLOAD,
            f"send -> first token, {size}",
            pct(ft, 50),
            "s",
            "-",
            None,
            note=f"p99 {_ms(pct(ft, 99))}; {len(ft)} sends in {o.elapsed:.0f} s"
            + (f"; {len(errors)} errors, first: {errors[0][:300]}" if errors else ""),
            samples=ft,
        ),
        Row(
            WORKLOAD,
            f"events stored, {size}",
            o.events / o.elapsed,
            "ev/s",
            "-",
            None,
            note=f"{o.events:,} events in {o.elapsed:.1f} s; CPU seconds per second: "
            f"members {o.client_cpu() / o.elapsed:.2f}, server {o.server_cpu / o.elapsed:.2f}, "
            f"machine busy {100 * o.machine:.0f}%; notifications heard "
            f"{o.heard() / o.elapsed:,.0f}/s",
        ),
        Row(
            WORKLOAD,
            f"search, {size}",
            pct(se, 50),
            "s",
            "-",
            None,
            note=f"p99 {_ms(pct(se, 99))}; {len(se)} searches",
            samples=se,
        ),
        Row(
            WORKLOAD,
            f"follow lag, {size}",
            pct(lag, 50),
            "s",
            "-",
            None,
            note=f"p99 {_ms(pct(lag, 99))}; {len(lag)} commits seen",
            samples=lag,
        ),
        Row(
            WORKLOAD,
            f"server connections (peak), {size}",
            float(max(conns)),
            "conns",
            "-",
            None,
            note=f"mean {statistics.fmean(conns):.0f}; active backends' waits: {waits or '-'}",
        ),
    ]


# ---------------------------------------------------------------- entry points


def run_all(
    users: Sequence[int],
    seconds: float,
    poolers: Sequence[bool],
    chunk_flush: float | None = None,
    poll: bool = False,
    server_conns: int = 0,
) -> list[Row]:
    rows: list[Row] = []
    with _cluster() as cluster:
        cluster.psql(
            "CREATE EXTENSION IF NOT EXISTS pg_stat_statements;"
            + ";".join(
                f"CREATE ROLE {role(i)} LOGIN NOSUPERUSER NOBYPASSRLS IN ROLE dsh_users"
                for i in range(max(users))
            )
        )
        for n in users:
            for pooled in poolers:
                config = Config(n, pooled, seconds, chunk_flush, poll, server_conns)
                print(f"  team_load: N={n} pooler={pooled}…", file=sys.stderr, flush=True)
                if pooled:
                    with _bouncer(cluster, max(users), server_conns) as bouncer:
                        outcome = run_config(cluster, config, bouncer)
                else:
                    outcome = run_config(cluster, config)
                print("  " + summary_line(outcome), file=sys.stderr, flush=True)
                top = "; ".join(f"{k} {v}" for k, v in outcome.waits.most_common(6))
                print(f"    waits: {top}", file=sys.stderr, flush=True)
                for q, calls, ms in outcome.statements:
                    print(f"    {ms:9.0f} ms {calls:7d}x {q}", file=sys.stderr, flush=True)
                for error in outcome.errors()[:3]:
                    print(f"    error: {error[:400]}", file=sys.stderr, flush=True)
                rows += rows_of(outcome)
    return rows


def _env_users() -> tuple[int, ...]:
    raw = os.environ.get("DSH_LOAD_USERS")
    return tuple(int(v) for v in raw.split(",")) if raw else USERS


def _poolers(choice: str) -> tuple[bool, ...]:
    if choice == "no":
        return (False,)
    if choice == "yes":
        return (True,)
    return (False, True) if pooler_available() else (False,)


def run_workload(settings: Settings) -> list[Row]:
    users = (10,) if settings.quick else _env_users()
    seconds = float(os.environ.get("DSH_LOAD_SECONDS", 10 if settings.quick else SECONDS))
    flush = os.environ.get("DSH_LOAD_CHUNK_FLUSH")
    return run_all(
        users,
        seconds,
        _poolers(os.environ.get("DSH_LOAD_POOLER", "both")),
        None if flush is None else float(flush),
    )


def main(argv: list[str] | None = None) -> int:
    from tests.benchmarks._common import format_table

    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_team_load")
    parser.add_argument("--users", type=int, nargs="+", default=list(USERS), metavar="N")
    parser.add_argument("--seconds", type=float, default=SECONDS)
    parser.add_argument("--pooler", choices=("no", "yes", "both"), default="both")
    parser.add_argument(
        "--chunk-flush",
        type=float,
        metavar="SECONDS",
        help="write a reply's chunks this often (0.05: as before issue 34)",
    )
    parser.add_argument(
        "--poll",
        action="store_true",
        help="direct too: follow by polling the change counter, as behind a pooler (no LISTEN)",
    )
    parser.add_argument(
        "--server-conns",
        type=int,
        default=0,
        metavar="N",
        help="PgBouncer's max_db_connections: server connections for all members (0: no cap)",
    )
    args = parser.parse_args(argv)
    rows = run_all(
        args.users,
        args.seconds,
        _poolers(args.pooler),
        args.chunk_flush,
        args.poll,
        args.server_conns,
    )
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
