"""The TUI's reply stops when another process takes its session's reply lease (``dsh unlock``
then a send elsewhere): a notice says so, the app does not crash, the transcript keeps what
streamed, nothing more of the reply is stored, and the other writer's messages follow."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

import core.engine.state
from core.log import ASSISTANT_MESSAGE, USER_MESSAGE, assistant_message, user_message
from core.providers.base import ProviderMessage, StreamEvent, TextDelta
from stores import SqliteSessionStore
from tests.core.test_engine_lease_lost import take_over
from tests.ui.conftest import SIZE, make_app
from tests.ui.snapshots import screen_text
from tests.ui.test_app import settle, wait_for
from tui.shared.runtime import Runtime

pytestmark = pytest.mark.timeout(60)


class StallingProvider:
    """Says one word, then waits until it is told to stop (a model that stalls)."""

    name = "stalling"
    model = "stall-1"

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.stopped = False

    async def stream(
        self, messages: Sequence[ProviderMessage], *, cancel: asyncio.Event | None = None
    ) -> AsyncIterator[StreamEvent]:
        self.started.set()
        yield TextDelta("Thinking about it")
        assert cancel is not None
        await cancel.wait()
        self.stopped = True

    async def aclose(self) -> None:
        return None


@pytest.fixture
async def elsewhere(tmp_path: Path) -> AsyncIterator[SqliteSessionStore]:
    """Another process's connection to the app's database."""
    opened = await SqliteSessionStore.open(tmp_path / "ui.sqlite3")
    try:
        yield opened
    finally:
        await opened.close()


async def test_a_reply_whose_lease_another_process_takes_stops_with_a_notice(
    runtime: Runtime, elsewhere: SqliteSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(core.engine.state, "REPLY_LEASE_RENEW_SECONDS", 0.05)
    provider = StallingProvider()
    rt = Runtime(runtime.config, runtime.store, runtime.query, runtime.service, provider)
    app = make_app(rt)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.current_id == "checkout"
        await pilot.press(*"slow one", "enter")
        await asyncio.wait_for(provider.started.wait(), 5)
        async with asyncio.timeout(5):  # the word streamed and its chunk is stored
            while (await elsewhere.read_events("checkout"))[-1].type != "assistant/chunk":
                await pilot.pause(0.02)

        await take_over(elsewhere, "checkout", "another process")  # `dsh unlock`, a send
        await wait_for(pilot, lambda: "reply lease" in app.notice.visible_text)
        notice = app.notice.visible_text
        assert notice.startswith("Another process took this session's reply lease")
        assert "the reply stopped; your message is saved" in notice
        assert provider.stopped and not app.streaming and app.is_running
        await settle(app, pilot)
        shown = screen_text(app)
        assert "Thinking about it" in shown and "✖ Error" in shown  # kept in view
        assert app.composer.draft == ""  # the message was sent (and is stored)

        events = await elsewhere.read_events("checkout")
        assert [e.type for e in events].count(ASSISTANT_MESSAGE) == 1  # the seeded one only
        assert events[-1].type == "assistant/chunk"  # what streamed; no message, no turn/end
        assert [e for e in events if e.type == USER_MESSAGE][-1].data["content"][0][
            "text"
        ] == "slow one"

        # The other process writes the session now; its messages show as they come.
        await elsewhere.append(
            "checkout",
            USER_MESSAGE,
            user_message("asked by the other process"),
            surface_op="append",
        )
        await elsewhere.append(
            "checkout",
            ASSISTANT_MESSAGE,
            {
                "turn": 3,
                "step": 0,
                "message": assistant_message("answered there", provider="p", model="m"),
                "finish": "completed",
            },
            surface_op="append",
        )
        await wait_for(pilot, lambda: "answered there" in screen_text(app), 15)
        assert "asked by the other process" in screen_text(app)
        assert app.is_running
