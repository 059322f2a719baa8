"""Workload ``team_search`` (issue 30, point 6): a member's message search in a team store of
1,000,000 messages over 20 members (``--quick``: 50,000).

The team database is made the README's way on a throwaway cluster (``tests/pgcluster.py``):
``pg_trgm`` in ``public`` (by the superuser), a database owned by ``dsh_admin``, who opens
dsh first (so schema 7's migration runs as it and it owns the tables), and 20 plain
members ``m00``..``m19`` in ``dsh_users``. Each member owns 50 sessions of equal size and
shares 3 of them with each of the next two members (so ``m03``, who searches, reads its
50 sessions and 6 of ``m01``'s and ``m02``'s: 5.6 % of the messages).

**Loading.** Through dsh's API 1M messages would take far too long, so the superuser
writes the rows in bulk: ``dsh_sessions`` and ``dsh_shares`` by ``INSERT``, the events by
``COPY`` in time order (every session's next message in turn, as a team writes them):
kind 1 ``user/message``/``assistant/message`` rows whose ``data`` is
``core.jsoncodec.dumps_js`` of ``core.log.user_message`` / ``assistant_message`` (as the
engine writes them), ``surface_op '"append"'``, ``projection`` and ``session_owner`` the
member. The tables' triggers stay on: ``dsh_index`` fills ``dsh_search`` (ids in time
order), the owner trigger and the foreign keys check every row. ``dsh_surface_nodes``
and ``dsh_surface_sums`` follow in SQL. A first row of the table compares that ``COPY``
with the triggers off and ``dsh_search`` filled by one ``INSERT … SELECT
dsh_search_text(type, data)``: the triggers cost 0-35 % more in our runs, not enough
to leave them out. The full run takes about 15 minutes on two busy cores, most of it
the load. Before the load, one session imported through the store by a member is
compared column by column with what the load writes for the same messages (events,
surface nodes, search rows). The texts are English-like sentences from a vocabulary of
3,000 words (Zipf), 5 % of the messages with a Chinese sentence; a rare word is put in
one message in 25,000 (about 40 in 1M).

**What grows.** The messages are loaded in three stages (each session a quarter, a half,
then all of its messages: 250k, 500k, 1M), ``VACUUM ANALYZE`` after each; the rare word
is measured at each stage, every query at the last.

**The paths compared**, for ``m03`` (not the tables' owner, not a superuser), interleaved,
medians (p90 in the notes):

* dsh: ``search_messages(q)`` through a store ``m03`` opened (``dsh_search_find``, then
  the ids under row security, then the ranking): the real path;
* old RLS: the query of the store before schema 7 (``SELECT s.id, m.seq, m.text FROM
  dsh_search AS m JOIN dsh_sessions AS s … ILIKE … ORDER BY m.id DESC LIMIT 1000``) as
  plain SQL by ``m03``. Members may no longer read ``dsh_search``, so it is emulated: the
  superuser keeps a copy, ``dsh_search_rls`` (same rows and ids, same primary key, same
  trigram index), with ``ENABLE`` and ``FORCE ROW LEVEL SECURITY``, the policy
  ``dsh_search`` had before schema 7 (``session_owner = current_user OR (session_key,
  session_owner) IN (SELECT session_key, owner FROM dsh_shares WHERE grantee =
  current_user)``) and ``SELECT`` granted to ``dsh_users``; the old query reads it;
* floor: the superuser's raw query on ``dsh_search`` (no row security, no access rule:
  every member's matches), planned for each pattern (``plan_cache_mode =
  force_custom_plan``): by default the prepared statement takes a generic plan after
  five runs, which reads the whole trigram index for a pattern without trigrams (a
  2-character or, in a C-locale database, a CJK term), 5-10x slower than a scan.
  ``dsh_search_find`` plans each call (``EXECUTE``); the old path, under row security,
  never uses the index whatever its plan.

The notes add ``dsh_search_find``'s statement alone (as ``m03``, no ranking) and one line
of each plan: the new path's from ``auto_explain`` (loaded by the superuser, which then
becomes ``m03`` with ``SET SESSION AUTHORIZATION`` and calls ``dsh_search_find``: the
function's inner statement is logged with ``ANALYZE`` and ``BUFFERS``), the old path's
and the floor's from ``EXPLAIN (ANALYZE, BUFFERS)`` as ``m03`` and as the superuser.

The workload's parts: ``_team_search_team`` (the team and its texts),
``_team_search_db`` (the cluster, the load), ``_team_search_measure`` (the paths timed,
the plans); this module runs them.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import asyncpg

from core.store import SessionStore
from stores import open_store
from tests.benchmarks._common import Row, Settings
from tests.benchmarks._team_search_db import (
    _check_bulk_rows,
    _cluster,
    _load_rates,
    _load_stage,
    _make_sessions,
    _setup_sql,
)
from tests.benchmarks._team_search_measure import Paths, _measure, _ms, _peak_rss_mb, _sanity
from tests.benchmarks._team_search_team import (
    ABSENT,
    ADMIN,
    GROUP,
    MEMBERS,
    RARE,
    SEARCHER,
    SESSIONS_PER_MEMBER,
    WORKLOAD,
    Texts,
)

DATABASE = "dsh_team"
SEARCH_TARGET = 0.020
"""A search's median (``bench_search``'s target, on SQLite): the rare word's at every size."""
LOAD_PROBE = 20_000  # messages of the load-rate comparison
LOAD_PROBE_QUICK = 2_000

QUERIES = (
    ("rare word", RARE),
    ("common word", "server"),
    ("two words", "index migration"),
    ("CJK substring", "数据库"),
    ("2-char term", "ui"),
    ("absent word", ABSENT),
)

OLD_TABLE = """
CREATE TABLE dsh_search_rls (
    session_key   bigint NOT NULL,
    seq           bigint NOT NULL,
    id            bigint NOT NULL,
    text          text   NOT NULL,
    session_owner text   NOT NULL,
    PRIMARY KEY (session_key, seq)
);
CREATE INDEX dsh_search_rls_trgm ON dsh_search_rls USING gin (text public.gin_trgm_ops);
ALTER TABLE dsh_search_rls ENABLE ROW LEVEL SECURITY;
ALTER TABLE dsh_search_rls FORCE ROW LEVEL SECURITY;
CREATE POLICY dsh_read ON dsh_search_rls FOR SELECT USING (session_owner = current_user
    OR (dsh_search_rls.session_key, session_owner) IN
       (SELECT session_key, owner FROM dsh_shares WHERE grantee = current_user));
GRANT SELECT ON dsh_search_rls TO dsh_users
"""


@dataclass(frozen=True)
class Scale:
    per_session: tuple[int, ...]  # messages per session at each stage
    reps: int


async def run_workload(settings: Settings) -> list[Row]:
    scale = Scale((12, 25, 50), 5) if settings.quick else Scale((250, 500, 1_000), 9)
    sessions_total = len(MEMBERS) * SESSIONS_PER_MEMBER
    rows: list[Row] = []
    with _cluster() as cluster:
        cluster.psql(_setup_sql())
        cluster.psql(f"CREATE DATABASE {DATABASE} OWNER {ADMIN}")
        cluster.psql(
            f"CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public; "
            f"GRANT USAGE ON SCHEMA public TO {GROUP}",
            database=DATABASE,
        )
        admin = await open_store(cluster.url(DATABASE, user=ADMIN))
        await admin.close()
        root = await asyncpg.connect(cluster.url(DATABASE))
        store: SessionStore | None = None
        member: asyncpg.Connection | None = None
        try:
            await root.execute(OLD_TABLE)
            store = await open_store(cluster.url(DATABASE, user=SEARCHER))
            member = await asyncpg.connect(cluster.url(DATABASE, user=SEARCHER))
            await _check_bulk_rows(root, store)
            await root.execute("SET maintenance_work_mem = '256MB'; SET work_mem = '64MB'")
            probe = LOAD_PROBE_QUICK if settings.quick else LOAD_PROBE
            trigger_rate, bulk_rate = await _load_rates(root, Texts(8), probe)
            rows.append(
                Row(
                    WORKLOAD,
                    f"COPY {probe:,} messages, triggers on vs off",
                    trigger_rate,
                    "ev/s",
                    "-",
                    None,
                    baseline=bulk_rate,
                    ratio=trigger_rate / bulk_rate,
                    note="messages/s into one session (ratio: higher is faster); ours: through "
                    "dsh_index, the owner trigger and the foreign keys (how the stages load); "
                    "baseline: triggers off, then dsh_search by one INSERT … SELECT "
                    "dsh_search_text(type, data)",
                )
            )
            load_spent: dict[str, float] = {}
            sessions = await _make_sessions(root)
            texts = Texts(30)
            paths = Paths(store, member, root)
            await root.execute("SET plan_cache_mode = force_custom_plan")  # see the floor
            growth: list[tuple[str, dict[str, float]]] = []
            lo = 0
            for stage, hi in enumerate(scale.per_session):
                started = time.perf_counter()
                spent = await _load_stage(root, texts, sessions, lo, hi)
                loaded = time.perf_counter() - started
                for name, took in spent.items():
                    load_spent[name] = load_spent.get(name, 0.0) + took
                lo = hi
                size = f"{hi * sessions_total:,}"
                steps = ", ".join(f"{name} {took:.1f} s" for name, took in spent.items())
                print(
                    f"  team_search: {size} messages, stage loaded in {loaded:.1f} s ({steps})",
                    file=sys.stderr,
                    flush=True,
                )
                if stage < len(scale.per_session) - 1:
                    stage_rows, medians = await _measure(
                        paths, "rare word", RARE, size, scale.reps, explain=False
                    )
                    rows += stage_rows[:1]
                    growth.append((size, medians))
            size = f"{scale.per_session[-1] * sessions_total:,}"
            sizes = await root.fetch(
                "SELECT c, pg_size_pretty(pg_total_relation_size(c)) FROM unnest("
                "ARRAY['dsh_events', 'dsh_search', 'dsh_search_trgm']::regclass[]) AS c"
            )
            rows.append(
                Row(
                    WORKLOAD,
                    f"bulk load of {size} messages",
                    sum(load_spent.values()),
                    "s",
                    "-",
                    None,
                    note="3 stages, each VACUUM ANALYZEd; "
                    + ", ".join(f"{name} {took:.1f} s" for name, took in load_spent.items())
                    + "; sizes (with indexes): "
                    + ", ".join(f"{name} {pretty}" for name, pretty in sizes)
                    + f"; this process's peak RSS {_peak_rss_mb():,.0f} MB",
                )
            )
            await _sanity(paths, root, scale.per_session[-1])
            for label, query in QUERIES:
                query_rows, medians = await _measure(
                    paths, label, query, size, scale.reps, explain=True
                )
                rows += query_rows
                if query == RARE:
                    growth.append((size, medians))
            first, last = growth[0][1], growth[-1][1]
            rows.append(
                Row(
                    WORKLOAD,
                    f"rare word growth {growth[0][0]} -> {growth[-1][0]}",
                    last["dsh"] / first["dsh"],
                    "x",
                    "dsh <= 20 ms at every size",
                    max(m["dsh"] for _, m in growth) <= SEARCH_TARGET,
                    baseline=last["old"] / first["old"],
                    note="ours: the dsh path's median at the largest size over the smallest; "
                    "baseline: the old RLS path's; the target is the search workload's; "
                    + ", ".join(f"{s}: dsh {_ms(m['dsh'])} old {_ms(m['old'])}" for s, m in growth),
                )
            )
        finally:
            if member is not None:
                await member.close()
            if store is not None:
                await store.close()
            await root.close()
    return rows
