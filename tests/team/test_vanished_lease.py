"""A reply lease held by a process on another machine that vanished (issue 34, point 2):
the session is busy until the lease runs out by the server's clock, then the next send
takes it over and answers; the same on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.engine import ChatSession, ReplyFinished
from core.errors import SessionBusyError
from core.leases import lease_owner_is_dead
from core.providers.offline import OfflineProvider
from core.references import SessionReferenceService
from core.store import SessionStore
from stores import SessionQuery, open_store
from tests.team.soundness import assert_store_sound

pytestmark = pytest.mark.timeout(60)

TTL_MS = 400
ELSEWHERE = "build-box-7.example:0123456789abcdef:4242:5f3a"  # another host's holder


@pytest.fixture(params=["sqlite", "postgres"])
async def location(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "dsh.sqlite3")
    else:
        yield request.getfixturevalue("url")


async def _send(chat: ChatSession, text: str) -> ReplyFinished:
    finished = None
    async for update in chat.send(text):
        if isinstance(update, ReplyFinished):
            finished = update
    assert finished is not None
    return finished


async def test_a_vanished_holders_lease_is_taken_over_after_it_expires(location: str) -> None:
    assert not lease_owner_is_dead(ELSEWHERE)  # nothing here can tell it is gone
    # The other machine's dsh: it takes the lease, streams nothing, and vanishes without
    # giving it back (its connection simply goes).
    gone = await open_store(location)
    await gone.create_session("s")
    assert await gone.take_reply_lease("s", ELSEWHERE, ttl_ms=TTL_MS)
    await gone.close()

    store: SessionStore = await open_store(location)
    try:
        header = await store.read_header("s")
        query = SessionQuery(store)
        chat = ChatSession(store, query, SessionReferenceService(query), OfflineProvider(), header)
        with pytest.raises(SessionBusyError) as caught:
            await _send(chat, "too early")
        assert caught.value.holder == ELSEWHERE
        assert await store.read_events("s") == []  # refused before anything was stored

        held = await store.read_reply_lease("s")
        assert held is not None and held.holder == ELSEWHERE
        await asyncio.sleep(max(0, held.expires_in_ms) / 1000 + 0.05)  # by the store's clock
        finished = await _send(chat, "after it ran out")
        assert finished.status == "completed"
        lease = await store.read_reply_lease("s")
        assert lease is None or not lease.live  # given back
        await assert_store_sound(store)
    finally:
        await store.close()
