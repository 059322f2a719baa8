"""The server restarts while a reply streams (issue 34, point 2): the text already shown
is stored once the server is back, the reply ends as an error, the user's message is kept,
and the next send works on the same store object."""

from __future__ import annotations

import asyncio

import pytest

from core.engine import ChatSession, ReplyDelta, ReplyFinished
from core.errors import ReplyUnsavedError, StoreUnreachableError
from core.providers.offline import OfflineProvider
from core.references import SessionReferenceService
from stores import SessionQuery
from stores.postgres import PostgresSessionStore
from tests.pgbouncer import pgbouncer_or_skip, running_pgbouncer
from tests.pgcluster import SUPERUSER, Cluster
from tests.team.soundness import assert_store_sound

pytestmark = pytest.mark.timeout(60)

LONG = " ".join(f"word{i}" for i in range(300))  # the offline model echoes it: a long reply


async def send_through_a_restart(
    chat: ChatSession, cluster: Cluster
) -> tuple[list[str], list[ReplyFinished]]:
    """Send a message with a long reply and restart the server well into it (some chunks
    already stored): the text shown, and the reply's end."""
    shown: list[str] = []
    finished: list[ReplyFinished] = []
    restarted: asyncio.Task[None] | None = None
    async for update in chat.send(f"Please repeat: {LONG}"):
        if isinstance(update, ReplyDelta):
            shown.append(update.text)
            if len(shown) == 20:
                restarted = asyncio.ensure_future(asyncio.to_thread(cluster.restart, down=0.3))
        elif isinstance(update, ReplyFinished):
            finished.append(update)
    assert restarted is not None
    await restarted
    return shown, finished


def _chat(store: PostgresSessionStore, header: object, delay: float) -> ChatSession:
    query = SessionQuery(store)
    return ChatSession(
        store, query, SessionReferenceService(query), OfflineProvider(chunk_delay=delay), header
    )


@pytest.mark.usefixtures("writes_every_50ms")
async def test_a_restart_mid_reply_keeps_the_text_shown(own_cluster: Cluster, url: str) -> None:
    store = await PostgresSessionStore.open(url)
    try:
        header = await store.create_session("s")
        chat = _chat(store, header, 0.01)
        shown, finished = await send_through_a_restart(chat, own_cluster)
        # The reply ended as an error (the store failed under it), with what was shown.
        [end] = finished
        assert end.status == "error"
        assert end.message_event is not None
        text = end.message_event.data["message"]["content"][0]["text"]
        assert text == "".join(shown)
        assert end.message_event.data["error"]["kind"] == "store"

        events = await store.read_events("s")
        [question] = [e for e in events if e.type == "user/message"]
        assert LONG in question.data["content"][0]["text"]  # the user's message is kept
        [reply] = [e for e in events if e.type == "assistant/message"]
        assert reply.data["message"]["content"][0]["text"] == "".join(shown)
        await assert_store_sound(store)

        # The next send works on the same store and the same chat, without reopening.
        async for update in chat.send("and again?"):
            if isinstance(update, ReplyFinished):
                assert update.status == "completed"
        await assert_store_sound(store)
        turns = [e.data["status"] for e in await store.read_events("s") if e.type == "turn/end"]
        assert turns == ["error", "completed"]
    finally:
        await store.close()


async def test_a_server_down_past_the_wait_keeps_the_reply_for_the_next_send(
    own_cluster: Cluster, url: str
) -> None:
    store = await PostgresSessionStore.open(url)
    try:
        header = await store.create_session("down")
        chat = _chat(store, header, 0.01)
        chat.store_retry_seconds = 0.3  # the server stays down longer than the reply waits
        shown: list[str] = []
        stopped: asyncio.Task[None] | None = None
        with pytest.raises(ReplyUnsavedError) as caught:
            async for update in chat.send(f"Please repeat: {LONG}"):
                if isinstance(update, ReplyDelta):
                    shown.append(update.text)
                    if len(shown) == 20:
                        stopped = asyncio.ensure_future(asyncio.to_thread(own_cluster.stop))
        assert stopped is not None
        await stopped
        assert "the server is not running" in str(caught.value)
        assert "\n" not in str(caught.value)

        # While the server is down, the next send fails in one line and stores nothing.
        with pytest.raises(StoreUnreachableError):
            async for _ in chat.send("while it is down"):
                pass
        own_cluster.start()
        # Back: the kept reply goes first, then the new exchange; the chat's own lease,
        # never given back, does not make the session busy.
        async for update in chat.send("after the restart"):
            if isinstance(update, ReplyFinished):
                assert update.status == "completed"
        events = await store.read_events("down")
        replies = [e for e in events if e.type == "assistant/message"]
        assert [r.data["finish"] for r in replies] == ["error", "completed"]
        assert replies[0].data["message"]["content"][0]["text"] == "".join(shown)
        assert replies[0].data["error"]["kind"] == "store"
        users = [e.data["content"][0]["text"] for e in events if e.type == "user/message"]
        assert users == [f"Please repeat: {LONG}", "after the restart"]
        await assert_store_sound(store)
    finally:
        await store.close()


async def test_a_restart_mid_reply_behind_a_pooler(own_cluster: Cluster, url: str) -> None:
    """Through PgBouncer the client's connection may survive the restart (the pooler holds
    the next statement until the server is back) or be cut: either way the reply shown is
    stored whole, or up to the cut and marked, and the next send works."""
    pgbouncer_or_skip()
    schema = url.rpartition("search_path=")[2]
    # (PgBouncer waits server_login_retry, 15 s by default, before it logs in again after
    # the restart: the reply stalls that long, as it would for a user.)
    with running_pgbouncer(own_cluster, [SUPERUSER], server_login_retry=0.2) as bouncer:
        store = await PostgresSessionStore.open(bouncer.url(search_path=schema))
        try:
            assert store.pooled
            header = await store.create_session("pooled")
            chat = _chat(store, header, 0.01)
            shown, finished = await send_through_a_restart(chat, own_cluster)
            [end] = finished
            assert end.message_event is not None
            text = end.message_event.data["message"]["content"][0]["text"]
            assert text == "".join(shown)
            assert end.status in ("completed", "error")
            await assert_store_sound(store)
            async for update in chat.send("and again?"):
                if isinstance(update, ReplyFinished):
                    assert update.status == "completed"
            await assert_store_sound(store)
        finally:
            await store.close()
