"""The app on a team server that fails (issue 34, point 2), driven with Textual's Pilot:
it waits for a server that is down at start and opens once it is up; a reply whose server
restarts ends as an error with the text shown stored, and the next message goes out from
the same app."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.pilot import Pilot

from core.config import DshConfig
from core.engine import STORE_RETRY_SECONDS
from core.log import Event
from core.providers.offline import OfflineProvider
from core.store import SessionStore
from stores import open_store
from tests.pgcluster import Cluster
from tests.team.soundness import assert_store_sound
from tests.ui.conftest import FIXED_NOW, SHOP, SIZE
from tests.ui.snapshots import screen_text
from tests.ui.test_app import wait_for
from tui.app.app import DshApp
from tui.app.busy import Busy
from tui.app.transcript.transcript import ReplyView
from tui.shared.runtime import open_runtime

pytestmark = pytest.mark.timeout(60)

LONG = " ".join(f"word{i}" for i in range(300))
# The engine waits up to STORE_RETRY_SECONDS for the server; a test waits a little longer
# (a restart on a busy machine, with other workers' tests beside it, takes seconds).
STORE_WAIT = STORE_RETRY_SECONDS + 5


async def reply_under_way(app: DshApp, pilot: Pilot[int]) -> None:
    """Send a message whose reply is long, and wait until part of it is shown."""
    await pilot.pause()
    app.composer.set_draft(f"Please repeat: {LONG}")
    await pilot.press("enter")
    await wait_for(pilot, lambda: "word10 " in screen_text(app).replace("\n", " "))


async def failed_then_completed(
    store: SessionStore, session: str, pilot: Pilot[int]
) -> list[Event]:
    """The session's events once its turns ended as failed, then completed (the reply the
    fault cut, then the next send); fails after about ten seconds."""
    for _ in range(500):
        events = await store.read_events(session)
        if [e.data["status"] for e in events if e.type == "turn/end"] == ["error", "completed"]:
            return events
        await pilot.pause(0.02)
    raise AssertionError(f"the next send did not complete: {events[-3:]}")


def _app(url: str, **kwargs: object) -> DshApp:
    options: dict[str, object] = {
        "config": DshConfig(database=url),
        "now": lambda: FIXED_NOW,
        "cwd": SHOP,
        "cursor_blink": False,
        "keep_drafts": False,
    }
    options.update(kwargs)
    return DshApp(**options)  # type: ignore[arg-type]


async def test_the_app_waits_for_a_server_that_is_down_then_works(
    own_cluster: Cluster, url: str, tmp_path: Path
) -> None:
    own_cluster.stop()
    started = False
    app = _app(url)
    app.connect_retry_seconds = 0.1
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: "Waiting for the server" in app.notice.visible_text)
            notice = app.notice.visible_text
            assert "not running or refuses connections" in notice and "Ctrl+Q" in notice
            assert app.activity.state is Busy.CONNECTING
            assert app.startup_error is None and app.is_running
            # Enter waits too, saying why; the draft stays.
            app.composer.set_draft("hello once it is up")
            await pilot.press("enter")
            await pilot.pause()
            assert app.composer.draft == "hello once it is up"
            assert "waiting for the server" in screen_text(app)

            await asyncio.to_thread(own_cluster.start)
            started = True
            await wait_for(pilot, lambda: app.activity.state is Busy.IDLE, limit=STORE_WAIT)
            assert "Waiting for the server" not in app.notice.visible_text
            await pilot.press("enter")  # the same app sends, without restarting
            await wait_for(
                pilot, lambda: "Earlier messages in this conversation" in screen_text(app)
            )
            await wait_for(pilot, lambda: app.activity.state is Busy.IDLE, limit=STORE_WAIT)
            assert app.startup_error is None
    finally:
        if not started:
            own_cluster.start()
    store = await open_store(url)
    try:
        [header] = await store.list_headers()
        texts = [e.type for e in await store.read_events(header.id)]
        assert texts.count("user/message") == 1 and texts.count("assistant/message") == 1
        await assert_store_sound(store)
    finally:
        await store.close()


async def test_ctrl_q_quits_while_waiting_for_the_server(own_cluster: Cluster, url: str) -> None:
    own_cluster.stop()
    try:
        app = _app(url)
        app.connect_retry_seconds = 0.1
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: "Waiting for the server" in app.notice.visible_text)
            await pilot.press("ctrl+q")
            await wait_for(pilot, lambda: not app.is_running)
    finally:
        own_cluster.start()
    store = await open_store(url)
    try:
        assert await store.list_headers() == []
        await assert_store_sound(store)
    finally:
        await store.close()


@pytest.mark.usefixtures("writes_every_50ms")
async def test_a_restart_mid_reply_in_the_app(own_cluster: Cluster, url: str) -> None:
    config = DshConfig(database=url)
    async with open_runtime(config, provider=OfflineProvider(chunk_delay=0.01)) as rt:
        app = DshApp(rt, now=lambda: FIXED_NOW, cwd=SHOP, cursor_blink=False, keep_drafts=False)
        async with app.run_test(size=SIZE) as pilot:
            await reply_under_way(app, pilot)
            await asyncio.to_thread(own_cluster.restart, down=0.3)  # over 50 ms writes
            await wait_for(pilot, lambda: app.activity.state is Busy.IDLE, limit=STORE_WAIT)
            error = app.query(ReplyView).last().record.error or ""
            assert "reply so far is saved" in error, error
            session = app.current_id
            assert session is not None
            events = await rt.store.read_events(session)
            [question] = [e for e in events if e.type == "user/message"]
            assert LONG in question.data["content"][0]["text"]  # the message is kept
            [reply] = [e for e in events if e.type == "assistant/message"]
            assert reply.data["finish"] == "error"
            assert reply.data["message"]["content"][0]["text"].startswith("Offline model")
            # The next message goes out from the same app, on the same store.
            app.composer.set_draft("once more")
            await pilot.press("enter")
            events = await failed_then_completed(rt.store, session, pilot)
            await wait_for(pilot, lambda: app.activity.state is Busy.IDLE, limit=STORE_WAIT)
        await assert_store_sound(rt.store)


async def test_esc_while_the_reply_waits_for_the_server_keeps_it_for_the_next_send(
    own_cluster: Cluster, url: str
) -> None:
    config = DshConfig(database=url)
    try:
        async with open_runtime(config, provider=OfflineProvider(chunk_delay=0.01)) as rt:
            app = DshApp(rt, now=lambda: FIXED_NOW, cwd=SHOP, cursor_blink=False, keep_drafts=False)
            async with app.run_test(size=SIZE) as pilot:
                await reply_under_way(app, pilot)
                await asyncio.to_thread(own_cluster.stop)
                await wait_for(pilot, lambda: "before retrying" in (app.activity.status or ""))
                await pilot.press("escape")  # stop waiting: the reply stays in memory
                await wait_for(pilot, lambda: app.activity.state is Busy.IDLE, limit=STORE_WAIT)
                error = app.query(ReplyView).last().record.error or ""
                assert "postgresql://dsh@" in error and "kept here" in error, error
                await asyncio.to_thread(own_cluster.start)
                session = app.current_id
                assert session is not None
                app.composer.set_draft("and now?")
                await pilot.press("enter")
                events = await failed_then_completed(rt.store, session, pilot)
                await wait_for(pilot, lambda: app.activity.state is Busy.IDLE, limit=STORE_WAIT)
            users = [e.data["content"][0]["text"] for e in events if e.type == "user/message"]
            assert users == [f"Please repeat: {LONG}", "and now?"]  # kept, in order
            first = next(e for e in events if e.type == "assistant/message")
            assert first.data["error"]["kind"] == "store"
            assert first.data["message"]["content"][0]["text"].startswith("Offline model")
            await assert_store_sound(rt.store)
    finally:
        own_cluster.start() if not _running(own_cluster) else None


def _running(cluster: Cluster) -> bool:
    try:
        cluster.psql("SELECT 1")
    except Exception:
        return False
    return True
