"""SPEC §4.1 (issue 31) on PostgreSQL: schema 8 (``stores.postgres.pairs``) writes each stored
surrogate pair as its character and makes what was counted over the halves again; its
``dsh_json`` indexes a pair as its character (a JSON file written by Python's
``json.dumps``: ``dsh search 🚀`` finds it)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from core.log import NewEvent, user_message
from stores import MemorySessionStore, open_store
from stores.postgres import SCHEMA_VERSION
from tests.pgcluster import Cluster
from tests.storekinds import pg_schema_url
from tests.stores.pgdowngrade import downgrade_sql

ROCKET = "\ud83d\ude80"


@pytest.fixture
def url(pg_cluster: Cluster) -> Iterator[str]:
    with pg_schema_url(pg_cluster) as where:
        yield where


def _events() -> list[NewEvent]:
    return [
        NewEvent(
            "user/message",
            user_message("rocket 🚀 launch, lone \ud800 stays", id="u1"),
            "append",
            time=10,
        ),
        NewEvent("session/title", {"title": "Launch 🚀", "source": {"kind": "user"}}, time=11),
        NewEvent("x/🚀", {"k🚀": ["🚀", "\udc00\ud83d"]}, time=12),
    ]


async def test_rows_written_with_pairs_apart_are_merged_by_the_upgrade(
    pg_cluster: Cluster, url: str
) -> None:
    schema = url.rpartition("search_path=")[2]
    memory = MemorySessionStore()
    async with await open_store(url) as pg:
        for store in (memory, pg):
            await store.create_session("mig-hé🚀", cwd="/w/🚀", created_at=1)
            await store.append_batch("mig-hé🚀", _events())
            await store.create_session("plain", created_at=2)
            await store.append(
                "plain",
                "user/message",
                user_message("no pair", id="u2"),
                surface_op="append",
                time=13,
            )

    # What the dsh of schema 7 wrote: the halves apart in the ids, cwds and types (their
    # surrogatepass bytes), escaped apart in the JSON, each counted 3 bytes, and indexed
    # as two U+FFFD (by step 6's dsh_json, back in place).
    def apart(column: str) -> str:
        return f"decode(replace(encode({column}, 'hex'), 'f09f9a80', 'eda0bdedba80'), 'hex')"

    pg_cluster.psql(
        downgrade_sql(schema, 7)
        + f"; SET search_path = {schema}"
        + f"; UPDATE dsh_sessions SET id = {apart('id')}, cwd = {apart('cwd')}"
        + f"; UPDATE dsh_events SET type = {apart('type')}, "
        "data = replace(data, '🚀', '\\ud83d\\ude80')"
        + "; UPDATE dsh_events SET projection = projection + 8 WHERE kind = 1 AND seq = 0 "
        "AND data LIKE '%rocket%'"
        + "; UPDATE dsh_surface_sums SET bytes = bytes + 2 WHERE messages = 1 AND bytes > 20"
        + "; UPDATE dsh_search AS s SET text = dsh_search_text(e.type, e.data) FROM dsh_events "
        "AS e WHERE e.session_key = s.session_key AND e.seq = s.seq"
    )
    assert "\ufffd\ufffd" in pg_cluster.psql(f"SELECT text FROM {schema}.dsh_search")
    async with await open_store(url) as store:  # upgraded
        assert [(h.id, h.cwd) for h in await store.list_headers()] == [
            (h.id, h.cwd) for h in await memory.list_headers()
        ]
        for sid in ("mig-hé🚀", "plain"):
            assert await store.read_events(sid) == await memory.read_events(sid)
            for budget in (0, 10, 30, 1_000):
                got = await store.read_message_tail(sid, budget)
                assert got[2] == (await memory.read_message_tail(sid, budget))[2]
        assert await store.read_header(f"mig-hé{ROCKET}") == await store.read_header("mig-hé🚀")
        assert (await store.read_titles())["mig-hé🚀"].title == "Launch 🚀"
        hits = await store.search_messages("🚀", limit=5)
        assert [(h.session_id, h.seq) for h in hits] == [("mig-hé🚀", 0)]
        assert hits == await memory.search_messages("🚀", limit=5)
        # A message imported from a file Python's json.dumps wrote (the pair escaped).
        data = json.loads(json.dumps(user_message("from a json.dumps file: 🚀🚀")))
        await store.append("plain", "user/message", data, surface_op="append")
        assert len(await store.search_messages("🚀🚀", limit=5)) == 1
    assert pg_cluster.psql(f"SELECT version FROM {schema}.dsh_schema") == str(SCHEMA_VERSION)
    assert "\ufffd\ufffd" not in pg_cluster.psql(f"SELECT text FROM {schema}.dsh_search")
    # A lone surrogate is still indexed as U+FFFD, a pair as its character.
    got = pg_cluster.psql(
        f"SELECT {schema}.dsh_json('\"\\ud83d\\ude80 \\ud800 \\udc00\\ud83d\\\\ud83d\\ude80\"') #>> '{{}}'"
    )
    assert got == "🚀 \ufffd \ufffd\ufffd\\ud83d\ufffd"
