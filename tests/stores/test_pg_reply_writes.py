"""A reply streamed into the PostgreSQL store (issue 34): its chunks are written a few
times a second (``PostgresSessionStore.chunk_flush_seconds``), not once per token as the
engine's default would, since every write wakes every member's follower; each chunk is
still stored once, in order, and the message holds the whole reply."""

from __future__ import annotations

import time

import asyncpg
import pytest

from core.engine import CHUNK_FLUSH_SECONDS, ChatSession, chunk_flush_seconds
from core.log import ASSISTANT_CHUNK, ASSISTANT_MESSAGE, message_text
from core.references import SessionReferenceService
from stores import SessionQuery, open_store
from stores.columns import encode_text
from stores.postgres import PostgresSessionStore
from tests.core.test_chunk_flush import GAP, WORDS, PacedProvider
from tests.pgcluster import Cluster

pytestmark = pytest.mark.timeout(60)


async def test_a_streamed_reply_is_written_a_few_times_a_second(pg_cluster: Cluster) -> None:
    name, url = pg_cluster.fresh_schema_url(migrated=True)
    async with await open_store(url) as store:
        assert isinstance(store, PostgresSessionStore)
        interval = chunk_flush_seconds(store)
        assert interval == store.chunk_flush_seconds() >= 4 * CHUNK_FLUSH_SECONDS
        header = await store.create_session("s")
        query = SessionQuery(store)
        chat = ChatSession(store, query, SessionReferenceService(query), PacedProvider(), header)
        began = time.monotonic()
        async for _ in chat.send("go"):
            pass
        elapsed = time.monotonic() - began
        events = await store.read_events("s")
    chunks = [e for e in events if e.type == ASSISTANT_CHUNK]
    assert [c.data["chunk"]["index"] for c in chunks] == list(range(len(WORDS)))
    assert "".join(c.data["chunk"]["text"] for c in chunks) == "".join(WORDS)
    assert [e.seq for e in events] == list(range(len(events)))
    [message] = [e for e in events if e.type == ASSISTANT_MESSAGE]
    assert message_text(message.data["message"]) == "".join(WORDS)
    # Rows written by one transaction share its xmin: the chunks (GAP apart, each alone
    # at the engine's default) took about one write per interval.
    root = await asyncpg.connect(pg_cluster.url())
    try:
        writes = await root.fetchval(
            f"SELECT count(DISTINCT xmin::text) FROM {name}.dsh_events WHERE type = $1",
            encode_text(ASSISTANT_CHUNK),
        )
    finally:
        await root.close()
    assert elapsed >= len(WORDS) * GAP
    assert writes <= elapsed / interval + 1
