"""Workload ``rls`` (issue 17): what PostgreSQL row-level security costs dsh's reads.

One team schema on a throwaway cluster (``tests/pgcluster.py``): ``alice`` migrates it
and owns 5,000 sessions (1,000 with ``--quick``) and one of 20,000 events (2,000);
``bob`` owns 500 more, a tenth of them shared with ``alice``. Each figure is ``alice``'s
(held to the FORCEd policies) beside the superuser's on the same rows (superusers bypass
row security): the ratio is the policies' cost.

* read_events: the whole 20,000-event session, through the store;
* raw read: the same rows as plain SQL (no decoding), the policies' cost alone; and
  as ``bob``, with whom the session is shared (the grants' path of the policies);
* last_surface_seq: one row of the long session (what each append's caller asks),
  through the store and as plain SQL;
* list_headers: every visible session (the listing cache cleared before each call);
* append: one event per transaction to a session of ``alice``'s (the superuser's
  baseline appends to one of its own: it may not write to ``alice``'s).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import asyncpg

from core.log import ASSISTANT_CHUNK, SESSION_TITLE, USER_MESSAGE, NewEvent, SessionHeader
from core.log import user_message as user_message_data
from stores.postgres import PostgresSessionStore
from tests.benchmarks._common import Row, Settings, median

TARGET = "within 1.5x of no row security"


@contextlib.contextmanager
def _cluster() -> Iterator[Any]:
    from tests.pgcluster import find_binaries, running_cluster

    bindir = find_binaries()
    if bindir is None:
        raise SystemExit("bench rls: no PostgreSQL binaries")
    with running_cluster(bindir) as cluster:
        yield cluster


async def _seed(store: PostgresSessionStore, prefix: str, count: int) -> list[str]:
    ids = []
    for i in range(count):
        header = SessionHeader(f"{prefix}{i:06d}", 1_700_000_000_000 - i, "/home/dev")
        await store.import_session(
            header,
            [
                NewEvent(USER_MESSAGE, user_message_data(f"question {i}"), "append", None, 1),
                NewEvent(SESSION_TITLE, {"title": f"Topic {i}"}, None, None, 2),
            ],
        )
        ids.append(header.id)
    return ids


async def _timed(
    ours: Callable[[], Awaitable[Any]], base: Callable[[], Awaitable[Any]], reps: int
) -> tuple[list[float], list[float]]:
    """Samples of both, interleaved (so that load on the machine hits both alike)."""
    await ours()  # warm: plans, caches
    await base()
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(reps):
        for fn, out in ((ours, samples[0]), (base, samples[1])):
            started = time.perf_counter()
            await fn()
            out.append(time.perf_counter() - started)
    return samples


async def run_workload(settings: Settings) -> list[Row]:
    from tests.pgcluster import ALICE, BOB

    sessions = 1_000 if settings.quick else 5_000
    events = 2_000 if settings.quick else 20_000
    reps = settings.reps(15, 5)
    rows: list[Row] = []
    with _cluster() as cluster:
        schema = cluster.team_schema()
        alice = await PostgresSessionStore.open(cluster.team_url(ALICE, schema))
        bob = await PostgresSessionStore.open(cluster.team_url(BOB, schema))
        root = await PostgresSessionStore.open(cluster.url(search_path=schema))
        try:
            await _seed(alice, "a", sessions)
            for sid in (await _seed(bob, "b", 500))[::10]:
                await bob.share(sid, ALICE)
            long = SessionHeader("long", 1_750_000_000_000, "/home/dev")
            await alice.import_session(
                long,
                [
                    NewEvent(USER_MESSAGE, user_message_data(f"m {i}"), "append", None, i)
                    for i in range(events)
                ],
            )
            await alice.share("long", BOB)
            mine = await alice.create_session("alice-append")
            theirs = await root.create_session("root-append")
            cluster.psql(f"ANALYZE; SET search_path = {schema}; ANALYZE")
            key = int(
                cluster.psql(
                    f"SELECT key FROM {schema}.dsh_sessions WHERE id = convert_to('long', 'UTF8')"
                )
            )
            raw_sql = f"SELECT seq, data FROM {schema}.dsh_events WHERE session_key = $1"
            last_sql = (
                f"SELECT seq FROM {schema}.dsh_events WHERE session_key = $1 "
                "AND kind = 1 ORDER BY seq DESC LIMIT 1"
            )
            raw = {}
            for name, url in (
                ("alice", cluster.team_url(ALICE, schema)),
                ("bob", cluster.team_url(BOB, schema)),
                ("root", None),
            ):
                raw[name] = await asyncpg.connect(url or cluster.url(search_path=schema))
            try:

                def pair(
                    label: str,
                    ours: Callable[[], Awaitable[Any]],
                    base: Callable[[], Awaitable[Any]],
                    times: int = 1,
                ) -> Callable[[], Awaitable[None]]:
                    async def measure() -> None:
                        a, b = await _timed(ours, base, reps * times)
                        ratio = median(a) / median(b)
                        rows.append(
                            Row(
                                "rls",
                                label,
                                median(a),
                                "s",
                                TARGET,
                                ratio <= 1.5,
                                baseline=median(b),
                                ratio=ratio,
                                samples=a,
                                baseline_samples=b,
                            )
                        )

                    return measure

                def headers(store: PostgresSessionStore) -> Callable[[], Awaitable[Any]]:
                    async def call() -> Any:
                        store._listings.clear()
                        return await store.list_headers()

                    return call

                measures = [
                    pair(
                        f"read_events {events:,}",
                        lambda: alice.read_events("long"),
                        lambda: root.read_events("long"),
                    ),
                    pair(
                        f"raw SQL read {events:,}",
                        lambda: raw["alice"].fetch(raw_sql, key),
                        lambda: raw["root"].fetch(raw_sql, key),
                    ),
                    pair(
                        f"raw SQL read {events:,}, by a grantee",
                        lambda: raw["bob"].fetch(raw_sql, key),
                        lambda: raw["root"].fetch(raw_sql, key),
                    ),
                    pair(
                        f"last_surface_seq @ {sessions:,} sessions",
                        lambda: alice.last_surface_seq("long"),
                        lambda: root.last_surface_seq("long"),
                        times=20,
                    ),
                    pair(
                        f"raw SQL last surface seq @ {sessions:,} sessions",
                        lambda: raw["alice"].fetchval(last_sql, key),
                        lambda: raw["root"].fetchval(last_sql, key),
                        times=20,
                    ),
                    pair(
                        f"list_headers {sessions + 50:,} visible",
                        headers(alice),
                        headers(root),
                    ),
                    pair(
                        "append one event",
                        lambda: alice.append(mine.id, ASSISTANT_CHUNK, {"text": "tok "}),
                        lambda: root.append(theirs.id, ASSISTANT_CHUNK, {"text": "tok "}),
                        times=20,
                    ),
                ]
                for measure in measures:
                    await measure()
            finally:
                for conn in raw.values():
                    await conn.close()
        finally:
            for store in (alice, bob, root):
                await store.close()
    return rows
