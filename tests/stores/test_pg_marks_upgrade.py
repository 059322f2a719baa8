"""Issue 32 on PostgreSQL: schema 9 adds ``dsh_events_marks``, the index ``read_latest_events``
reads; issue 33's schema 10 makes it again with ``session/source``. Events were never
packed here, so the profiles, forks and sources an older dsh stored (an unknown type to
it: an imported log may hold them) are found as they are."""

from __future__ import annotations

import pytest

from core.log import SESSION_FORK, SESSION_MARK_TYPES, SESSION_PROFILE, SESSION_SOURCE, NewEvent
from stores import MemorySessionStore, open_store
from stores.postgres import SCHEMA_VERSION
from stores.postgres.rows import latest_events_sql
from tests.pgcluster import Cluster
from tests.storekinds import pg_schema_url
from tests.stores.pgdowngrade import downgrade_sql


def _log() -> list[NewEvent]:
    chunk = {"turn": 1, "step": 0, "chunk": {"type": "text-delta", "index": 0, "text": "x"}}
    source = {"tool": "codex", "file": "/r/rollout.jsonl", "id": "r \ud800"}
    return [
        NewEvent(SESSION_SOURCE, source, time=9),
        NewEvent(SESSION_FORK, {"parent": {"id": "origin", "seq": 2}}, time=10),
        NewEvent("assistant/chunk", chunk, time=11),
        NewEvent(
            SESSION_PROFILE, {"profile": "old \ud800", "provider": "p", "model": "m"}, time=12
        ),
        NewEvent("assistant/chunk", chunk, time=13),
        NewEvent(SESSION_PROFILE, {"profile": "new", "provider": "p", "model": "m2"}, time=14),
        NewEvent("turn/end", {"turn": 1}, time=15),
    ]


@pytest.mark.parametrize("version", [8, 9])
async def test_an_older_database_upgrades_and_its_marks_are_found(
    pg_cluster: Cluster, version: int
) -> None:
    """Schema 8 (no index of marks) and 9 (one without sources) upgrade to the index of
    every mark type."""
    memory = MemorySessionStore()
    with pg_schema_url(pg_cluster) as url:
        schema = url.rpartition("search_path=")[2]
        async with await open_store(url) as pg:
            for store in (memory, pg):
                await store.create_session("imported", created_at=1)
                await store.append_batch("imported", _log())
                await store.create_session("plain", created_at=2)
        pg_cluster.psql(downgrade_sql(schema, version))
        index = f"SELECT pg_get_indexdef('{schema}.dsh_events_marks'::regclass)"
        if version == 8:
            assert pg_cluster.psql(f"SELECT to_regclass('{schema}.dsh_events_marks')") == ""
        else:
            assert SESSION_SOURCE.encode().hex() not in pg_cluster.psql(index)
        async with await open_store(url) as store:  # upgraded
            for type_ in SESSION_MARK_TYPES:
                found = await store.read_latest_events(type_)
                assert found == await memory.read_latest_events(type_)
                assert list(found) == ["imported"]
            assert (await store.read_latest_events(SESSION_PROFILE))["imported"].seq == 5
            assert (await store.read_latest_events(SESSION_SOURCE))["imported"].seq == 0
            assert await store.read_events("imported") == await memory.read_events("imported")
        assert pg_cluster.psql(f"SELECT version FROM {schema}.dsh_schema") == str(SCHEMA_VERSION)
        for type_ in SESSION_MARK_TYPES:
            assert type_.encode().hex() in pg_cluster.psql(index)
            plan = pg_cluster.psql(
                f"SET search_path = {schema}; SET enable_seqscan = off; "
                f"EXPLAIN {latest_events_sql(type_, 'dsh_sessions')}"
            )
            assert "dsh_events_marks" in plan, plan
