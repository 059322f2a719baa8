"""The ``team_search`` workload's database: the throwaway cluster, the team's roles and
sessions, the bulk load by stages, its rate with and without triggers, and the check of
the bulk rows against what the store writes."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Awaitable, Iterator, Sequence
from typing import Any

import asyncpg

from core.log import NewEvent, SessionHeader
from core.store import SessionStore
from tests.benchmarks._team_search_team import (
    ADMIN,
    BASE_TIME,
    EVENT_COLUMNS,
    GROUP,
    MEMBERS,
    SEARCHER,
    SESSIONS_PER_MEMBER,
    SHARED_SESSIONS,
    SHARED_WITH,
    Texts,
    event_records,
    event_time,
    message,
)

# ---------------------------------------------------------------- the database


@contextlib.contextmanager
def _cluster() -> Iterator[Any]:
    from tests.pgcluster import find_binaries, running_cluster

    bindir = find_binaries()
    if bindir is None:
        raise SystemExit("bench team_search: no PostgreSQL binaries")
    with running_cluster(bindir) as cluster:
        yield cluster


def _setup_sql() -> str:
    """The README's "Setting up a team database", as the superuser (the group exists)."""
    roles = [f"CREATE ROLE {ADMIN} LOGIN"]
    roles += [f"CREATE ROLE {m} LOGIN NOSUPERUSER NOBYPASSRLS IN ROLE {GROUP}" for m in MEMBERS]
    return ";".join(roles)


SEARCH_FILL = """
INSERT INTO dsh_search (session_key, seq, text, session_owner)
SELECT e.session_key, e.seq, t.text, e.session_owner FROM dsh_events AS e
CROSS JOIN LATERAL (SELECT dsh_search_text(e.type, e.data) AS text) AS t
WHERE e.session_key = $1 AND e.kind = 1 AND t.text IS NOT NULL
ORDER BY e.time, e.seq
"""


async def _load_stage(
    root: asyncpg.Connection, texts: Texts, sessions: Sequence[tuple[int, str]], lo: int, hi: int
) -> dict[str, float]:
    """Seqs ``lo``..``hi - 1`` of every session, in bulk (see the module doc); the seconds
    each step took."""
    spent: dict[str, float] = {}

    async def step(name: str, work: Awaitable[Any]) -> Any:
        started = time.perf_counter()
        result = await work
        spent[name] = time.perf_counter() - started
        return result

    async with root.transaction():
        before = await root.fetchval("SELECT coalesce(max(id), 0) FROM dsh_search")
        records = event_records(texts, sessions, lo, hi)
        await step(
            "events and dsh_search",
            root.copy_records_to_table("dsh_events", records=records, columns=EVENT_COLUMNS),
        )
        await step(
            "surface nodes",
            root.execute(
                "INSERT INTO dsh_surface_nodes (session_key, pos, seq, projection, session_owner) "
                "SELECT session_key, seq, seq, projection, session_owner FROM dsh_events "
                "WHERE kind = 1 AND seq >= $1 AND seq < $2",
                lo,
                hi,
            ),
        )
        await step(
            "old copy",
            root.execute(
                "INSERT INTO dsh_search_rls SELECT session_key, seq, id, text, session_owner "
                "FROM dsh_search WHERE id > $1",
                before,
            ),
        )
        await root.execute("UPDATE dsh_sessions SET next_seq = $1", hi)
        await root.execute("DELETE FROM dsh_surface_sums")
        await root.execute(
            "INSERT INTO dsh_surface_sums (session_key, messages, bytes, session_owner) "
            "SELECT session_key, count(*), sum(projection >> 2), min(session_owner) "
            "FROM dsh_surface_nodes WHERE projection >= 0 AND projection & 2 = 0 "
            "GROUP BY session_key"
        )
    await step(
        "vacuum",
        root.execute(
            "VACUUM ANALYZE dsh_sessions, dsh_shares, dsh_events, dsh_surface_nodes, "
            "dsh_surface_sums, dsh_search, dsh_search_rls"
        ),
    )
    return spent


async def _make_sessions(root: asyncpg.Connection) -> list[tuple[int, str]]:
    """Every member's sessions and shares; (key, owner) of each session."""
    owners = [m for m in MEMBERS for _ in range(SESSIONS_PER_MEMBER)]
    ids = [f"{m}-s{j:02d}".encode() for m in MEMBERS for j in range(SESSIONS_PER_MEMBER)]
    rows = await root.fetch(
        "INSERT INTO dsh_sessions (id, created_at, cwd, owner) "
        "SELECT u.id, $3 + (u.n - 1) * 37 - 1000, convert_to('/home/' || u.owner || '/dsh', "
        "'UTF8'), u.owner FROM unnest($1::bytea[], $2::text[]) WITH ORDINALITY AS u (id, owner, n) "
        "RETURNING key, owner",
        ids,
        owners,
        BASE_TIME,
    )
    sessions = [(row["key"], row["owner"]) for row in rows]
    shares = []
    for i, member in enumerate(MEMBERS):
        mine = [key for key, owner in sessions if owner == member][:SHARED_SESSIONS]
        for step in range(1, SHARED_WITH + 1):
            grantee = MEMBERS[(i + step) % len(MEMBERS)]
            shares += [(key, member, grantee) for key in mine]
    await root.copy_records_to_table(
        "dsh_shares", records=shares, columns=("session_key", "owner", "grantee")
    )
    return sessions


async def _load_rates(root: asyncpg.Connection, texts: Texts, count: int) -> tuple[float, float]:
    """Messages per second of a ``COPY`` of ``count`` messages into one session of
    ``SEARCHER``'s, as ``_load_stage`` does it (through the tables' triggers: ``dsh_index``
    fills ``dsh_search`` a row at a time, the owner trigger, the foreign keys' checks),
    and with the triggers off and ``dsh_search`` filled after by one ``INSERT … SELECT``
    (the other way the load could go). Each session is deleted after."""
    rates = []
    for name, triggers in (("load-triggers", True), ("load-bulk", False)):
        key = await root.fetchval(
            "INSERT INTO dsh_sessions (id, created_at, owner) VALUES ($1, $2, $3) RETURNING key",
            name.encode(),
            BASE_TIME,
            SEARCHER,
        )
        records = list(event_records(texts, [(key, SEARCHER)], 0, count))
        started = time.perf_counter()
        async with root.transaction():
            if not triggers:
                await root.execute("SET LOCAL session_replication_role = replica")
            await root.copy_records_to_table("dsh_events", records=records, columns=EVENT_COLUMNS)
            if not triggers:
                await root.execute(SEARCH_FILL, key)
        rates.append(count / (time.perf_counter() - started))
        indexed = await root.fetchval("SELECT count(*) FROM dsh_search WHERE session_key = $1", key)
        assert indexed == count, f"{name}: {indexed} of {count} messages indexed"
        await root.execute("DELETE FROM dsh_sessions WHERE key = $1", key)
    return rates[0], rates[1]


async def _check_bulk_rows(root: asyncpg.Connection, member: SessionStore) -> None:
    """A session imported through the store by a member holds exactly the rows the bulk
    load writes for the same messages (the search rows are the trigger's)."""
    count = 6
    header = SessionHeader("probe", BASE_TIME, "/home/probe")
    made = [message(Texts(7), seq) for seq in range(count)]
    await member.import_session(
        header,
        [
            NewEvent(m.type.decode(), json.loads(m.data), "append", None, event_time(0, seq))
            for seq, m in enumerate(made)
        ],
    )
    key = await root.fetchval("SELECT key FROM dsh_sessions WHERE id = 'probe'::bytea")
    events = await root.fetch(
        "SELECT seq, type, time, kind, data, surface_op, source_event_seqs, projection, "
        "session_owner FROM dsh_events WHERE session_key = $1 ORDER BY seq",
        key,
    )
    expected = [
        (seq, m.type, event_time(0, seq), 1, m.data, '"append"', None, m.projection, SEARCHER)
        for seq, m in enumerate(made)
    ]
    assert [tuple(r) for r in events] == expected, "bulk events differ from the store's"
    nodes = await root.fetch(
        "SELECT pos, seq, projection, session_owner FROM dsh_surface_nodes "
        "WHERE session_key = $1 ORDER BY pos",
        key,
    )
    assert [tuple(r) for r in nodes] == [(s, s, m.projection, SEARCHER) for s, m in enumerate(made)]
    indexed = await root.fetch(
        "SELECT seq, text, session_owner FROM dsh_search WHERE session_key = $1 ORDER BY seq", key
    )
    assert [tuple(r) for r in indexed] == [(s, m.text, SEARCHER) for s, m in enumerate(made)]
    await member.delete_session("probe")
