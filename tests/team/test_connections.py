"""A connection killed by an admin (``pg_terminate_backend``) during an append, a search
and a follow (issue 34, point 2): the append is stored once or not at all and says so in
one line, the search is tried again on a fresh connection (or fails in one line), the
follower reconnects and says so. Each statement is made to wait on a lock held by the
test, so that the kill lands while it runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import asyncpg
import pytest

from core.engine import ChatSession, ReplyFinished, Submitted
from core.errors import StoreUnreachableError
from core.log import USER_MESSAGE, Event, NewEvent, user_message
from core.providers.offline import OfflineProvider
from core.references import SessionReferenceService
from stores import SessionQuery
from stores.postgres import PostgresSessionStore
from tests.pgcluster import Cluster
from tests.team.soundness import assert_store_sound

pytestmark = pytest.mark.timeout(60)


def _schema(url: str) -> str:
    return url.rpartition("search_path=")[2]


@asynccontextmanager
async def _locked(cluster: Cluster, url: str) -> AsyncIterator[asyncpg.Connection]:
    """The schema's sessions table locked by the superuser until the block ends."""
    conn = await asyncpg.connect(cluster.url())
    try:
        async with conn.transaction():
            await conn.execute(f"LOCK TABLE {_schema(url)}.dsh_sessions IN ACCESS EXCLUSIVE MODE")
            yield conn
    finally:
        await conn.close()


async def _waiting_pid(admin: asyncpg.Connection, besides: int | None = None) -> int:
    """The pid of dsh's backend that waits on the test's lock (another than ``besides``)."""
    for _ in range(500):
        pids = await admin.fetch(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'dsh' "
            "AND wait_event_type = 'Lock'"
        )
        found = [row[0] for row in pids if row[0] != besides]
        if found:
            return int(found[0])
        await asyncio.sleep(0.01)
    raise AssertionError("no dsh statement waits on the lock")


async def _kill(admin: asyncpg.Connection, pid: int) -> None:
    assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)


async def test_an_append_whose_connection_is_killed_is_not_stored(
    own_cluster: Cluster, url: str
) -> None:
    store = await PostgresSessionStore.open(url)
    try:
        await store.create_session("s")
        await store.append("s", USER_MESSAGE, user_message("first"), surface_op="append")
        async with _locked(own_cluster, url) as lock:
            admin = await asyncpg.connect(own_cluster.url())
            try:
                append = asyncio.ensure_future(
                    store.append("s", USER_MESSAGE, user_message("killed"), surface_op="append")
                )
                await _kill(admin, await _waiting_pid(admin))
                with pytest.raises(StoreUnreachableError) as caught:
                    await append
            finally:
                await admin.close()
            del lock
        said = str(caught.value)
        assert "\n" not in said and "lost the connection" in said, said
        # Not stored (it never committed), and never tried again behind the caller's back.
        texts = [e.data["content"][0]["text"] for e in await store.read_events("s")]
        assert texts == ["first"]
        # The same store goes on: the next append gets the next seq.
        event = await store.append("s", USER_MESSAGE, user_message("next"), surface_op="append")
        assert event.seq == 1
        await assert_store_sound(store)
    finally:
        await store.close()


async def test_a_search_whose_connection_is_killed_is_tried_again(
    own_cluster: Cluster, url: str
) -> None:
    store = await PostgresSessionStore.open(url)
    try:
        await store.create_session("found")
        await store.append(
            "found", USER_MESSAGE, user_message("a needle here"), surface_op="append"
        )
        admin = await asyncpg.connect(own_cluster.url())
        try:
            async with _locked(own_cluster, url):
                search = asyncio.ensure_future(store.search_messages("needle"))
                first = await _waiting_pid(admin)
                await _kill(admin, first)
                await _waiting_pid(admin, besides=first)  # tried again, on a new connection
            hits = await search  # the lock is gone: the second try answers
            assert [h.session_id for h in hits] == ["found"]

            # Killed on its second try as well: one clear line, no second retry.
            async with _locked(own_cluster, url):
                search = asyncio.ensure_future(store.search_messages("needle"))
                first = await _waiting_pid(admin)
                await _kill(admin, first)
                await _kill(admin, await _waiting_pid(admin, besides=first))
                with pytest.raises(StoreUnreachableError) as caught:
                    await search
            said = str(caught.value)
            assert "\n" not in said and "lost the connection" in said, said
            assert [h.session_id for h in await store.search_messages("needle")] == ["found"]
        finally:
            await admin.close()
        await assert_store_sound(store)
    finally:
        await store.close()


async def test_a_follower_whose_listening_connection_is_killed_reconnects(
    own_cluster: Cluster, url: str
) -> None:
    follower = await PostgresSessionStore.open(url)
    writer = await PostgresSessionStore.open(url)
    admin = await asyncpg.connect(own_cluster.url())
    try:
        seen = await follower.change_token()
        listening = await admin.fetch(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'dsh' "
            "AND query LIKE 'LISTEN%'"
        )
        assert len(listening) == 1  # the follower's: a store listens once it is asked
        for (pid,) in listening:
            await _kill(admin, pid)
        notice = None
        for _ in range(300):  # the follower polls as the app does, until it notices
            token = await follower.change_token()
            notice = follower.take_notice()
            if notice is not None:
                break
            await asyncio.sleep(0.01)
        assert notice is not None
        words, warning = notice
        assert words.startswith("Reconnected to ") and not warning
        assert token > seen  # what was missed meanwhile counts as a change
        # Notifications are heard again on the new connection.
        await writer.create_session("w")
        for _ in range(300):
            if await follower.change_token() > token:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the reconnected follower hears no commit")
        await assert_store_sound(follower)
    finally:
        await admin.close()
        await writer.close()
        await follower.close()


class _LostAfterCommit(PostgresSessionStore):
    """A real store whose first append of a user's message commits and then loses the
    connection before the answer arrives (what a kill right after COMMIT does; a test
    cannot time a real kill into that gap)."""

    lose_next = True

    async def append_batch(self, session_id: str, events: Sequence[NewEvent]) -> list[Event]:
        written = await super().append_batch(session_id, events)
        if self.lose_next and events[-1].type == USER_MESSAGE:
            self.lose_next = False
            raise StoreUnreachableError(f"{self.location}: lost the connection: test")
        return written


async def test_a_message_stored_before_its_connection_went_is_not_sent_twice(
    url: str,
) -> None:
    store = await _LostAfterCommit.open(url)
    try:
        header = await store.create_session("once")
        query = SessionQuery(store)
        chat = ChatSession(store, query, SessionReferenceService(query), OfflineProvider(), header)
        updates = [u async for u in chat.send("only once, please")]
        submitted = updates[0]
        assert isinstance(submitted, Submitted)  # found stored: the send goes on
        assert [e.seq for e in submitted.events] == [0]
        assert isinstance(updates[-2], ReplyFinished) and updates[-2].status == "completed"
        events = await store.read_events("once")
        assert [e.type for e in events].count("user/message") == 1
        await assert_store_sound(store)
    finally:
        await store.close()
