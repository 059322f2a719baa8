"""The TUI on a full disk: after a reply that could not be stored the notice says the
message is saved, and Ctrl+R (also in the palette) answers it once, without sending it
again; a completely full disk still opens, for reading, and says why sending is off."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from core.config import DshConfig
from core.log import ASSISTANT_MESSAGE, USER_MESSAGE, message_text
from core.providers.base import ProviderError, ProviderMessage, StreamEvent, TextDelta
from core.providers.offline import OfflineProvider
from stores import SqliteSessionStore
from tests.fulldisk import SmallDisk, cap_pages, small_disk, tmpfs_mounts
from tests.ui.conftest import SIZE, make_app, seed
from tests.ui.snapshots import screen_text
from tests.ui.test_app import send_idle, settle, wait_for
from tests.ui.test_busy import footer_keys
from tui.shared.runtime import Runtime, open_runtime

__all__ = ["small_disk", "tmpfs_mounts"]


class FillingProvider:
    """Fills the store's disk on its first reply (the message is stored by then) and
    streams more than fits; answers briefly once the disk has room again."""

    name = "filling"
    model = "filling-1"

    def __init__(self, store: SqliteSessionStore) -> None:
        self.store = store
        self.calls: list[list[ProviderMessage]] = []

    async def stream(
        self, messages: Sequence[ProviderMessage], *, cancel: asyncio.Event | None = None
    ) -> AsyncIterator[StreamEvent]:
        self.calls.append(list(messages))
        if len(self.calls) == 1:
            await cap_pages(self.store)
            for _ in range(600):
                await asyncio.sleep(0)
                yield TextDelta("x" * 2048)
        else:
            yield TextDelta("Answered at last.")

    async def aclose(self) -> None:
        return None


async def test_a_reply_lost_to_a_full_disk_is_answered_again_with_ctrl_r(
    runtime: Runtime,
) -> None:
    store = runtime.store
    assert isinstance(store, SqliteSessionStore)
    provider = FillingProvider(store)
    rt = Runtime(runtime.config, store, runtime.query, runtime.service, provider)
    app = make_app(rt)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.check_action("answer_again", ()) is None  # nothing to answer yet: dimmed
        await wait_for(pilot, lambda: footer_keys(app).get("answer_again") is False)
        await pilot.press(*"is the disk ok?", "enter")
        await wait_for(pilot, lambda: bool(app.notice.visible_text))
        await send_idle(app, pilot)
        assert app.notice.visible_text == (
            "Your message is saved; the reply could not be stored: the disk is full. "
            "Free some space, then press Ctrl+R to answer it."
        )
        assert app.check_action("answer_again", ()) is True
        await wait_for(pilot, lambda: footer_keys(app).get("answer_again") is True)
        assert "^r Answer again" in screen_text(app)  # lit, first in the footer

        await cap_pages(store, 1_000_000)  # space is back
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: len(provider.calls) == 2)
        await send_idle(app, pilot)
        assert provider.calls[1] == provider.calls[0]  # the same question, asked again
        events = await store.read_events("checkout")
        asked = [message_text(e.data) for e in events if e.type == USER_MESSAGE]
        assert asked.count("is the disk ok?") == 1
        replies = [e for e in events if e.type == ASSISTANT_MESSAGE]
        assert message_text(replies[-1].data["message"]) == "Answered at last."
        assert "Answered at last." in screen_text(app)
        assert app.check_action("answer_again", ()) is None
        assert app.notice.visible_text == ""

        # The key is dimmed again (after the lit ones, so cut off at this width); the
        # palette entry says why and does nothing.
        await wait_for(pilot, lambda: footer_keys(app).get("answer_again") is False)
        assert "Answer again" not in screen_text(app)
        command = next(c for c in app.get_system_commands(app.screen) if c.title == "Answer again")
        assert command.help.startswith("Nothing to answer now")
        command.callback()
        await pilot.pause(0.1)
        assert "Nothing to answer" in app.notice.visible_text
        assert len(provider.calls) == 2


async def test_a_completely_full_disk_opens_for_reading_and_says_so(small_disk: SmallDisk) -> None:
    path = small_disk.root / "ui.sqlite3"
    async with await SqliteSessionStore.open(path) as writable:
        await seed(writable)
    small_disk.fill()
    config = DshConfig(database=path)
    async with open_runtime(config, provider=OfflineProvider()) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert app.current_id == "checkout"
            assert "Can we merge shipping and billing?" in screen_text(app)
            assert app.notice.visible_text == (
                "The disk is full, so dsh opened the database read-only: "
                "you can read sessions but not send."
            )
            assert not app.composer.send_enabled
            await pilot.press(*"hello", "enter")
            await pilot.pause()
            assert app.notice.visible_text.startswith("The disk is full")


class FailingOnceProvider:
    """Fails before its first word once, then answers."""

    name = "flaky"
    model = "flaky-1"

    def __init__(self) -> None:
        self.calls = 0

    async def stream(
        self, messages: Sequence[ProviderMessage], *, cancel: asyncio.Event | None = None
    ) -> AsyncIterator[StreamEvent]:
        self.calls += 1
        if self.calls == 1:
            raise ProviderError("the server is overloaded", "http")
        yield TextDelta("Here now.")

    async def aclose(self) -> None:
        return None


async def test_a_model_error_before_any_word_offers_ctrl_r(runtime: Runtime) -> None:
    provider = FailingOnceProvider()
    rt = Runtime(runtime.config, runtime.store, runtime.query, runtime.service, provider)
    app = make_app(rt)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press(*"anyone there?", "enter")
        await wait_for(pilot, lambda: bool(app.notice.visible_text))
        await send_idle(app, pilot)
        assert app.notice.visible_text == (
            "The model failed: the server is overloaded. "
            "Your message is saved; press Ctrl+R to ask again."
        )
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: provider.calls == 2)
        await send_idle(app, pilot)
        events = await runtime.store.read_events("checkout")
        asked = [message_text(e.data) for e in events if e.type == USER_MESSAGE]
        assert asked.count("anyone there?") == 1
        assert "Here now." in screen_text(app)
