"""One busy state: while a reply streams or a session is compacted, the actions that would
change the session are hidden from the footer (``check_action`` is ``False``; issue 31) and
their keys do nothing; the status line follows the same state."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from core.providers.base import ProviderMessage, StreamEvent, TextDelta
from tests.ui.conftest import SIZE, make_app
from tests.ui.snapshots import screen_text
from tests.ui.test_app import send_idle, settle, wait_for
from tui.app.app import DshApp
from tui.app.busy import EXCLUSIVE_ACTIONS, Busy, action_available, busy_reason
from tui.app.screens.modals import ConfirmScreen, RenameScreen
from tui.shared.runtime import Runtime

EXCLUSIVE = ("new_session", "compact_session", "delete_session", "answer_again")


def footer_keys(app: DshApp) -> dict[str, bool]:
    """The footer's keys by action: ``True`` when lit, ``False`` when dimmed."""
    from textual.widgets import Footer

    footer = app.screen.query_one(Footer)
    return {
        key.action: not key.has_class("-disabled")  # type: ignore[attr-defined]
        for key in footer.children
        if hasattr(key, "action") and not key.has_class("-command-palette")
    }


class GatedProvider:
    """Answers each call only when its gate is opened (a slow model)."""

    name = "gated"
    model = "gated-1"

    def __init__(self) -> None:
        self.calls = 0
        self.started = asyncio.Event()
        self.gate = asyncio.Event()

    async def stream(
        self, messages: Sequence[ProviderMessage], *, cancel: asyncio.Event | None = None
    ) -> AsyncIterator[StreamEvent]:
        self.calls += 1
        self.started.set()
        yield TextDelta("Thinking")
        await self.gate.wait()
        yield TextDelta(" done.")

    async def aclose(self) -> None:
        return None


def gated(runtime: Runtime) -> tuple[Runtime, GatedProvider]:
    provider = GatedProvider()
    return Runtime(
        runtime.config, runtime.store, runtime.query, runtime.service, provider
    ), provider


# --------------------------------------------------------------------------- the rules


def test_idle_allows_everything_and_busy_keeps_the_exclusive_actions_out() -> None:
    assert set(EXCLUSIVE) == EXCLUSIVE_ACTIONS
    for action in [*EXCLUSIVE, "rename_session", "help", "cancel", "toggle_sidebar"]:
        assert action_available(action, Busy.IDLE)
    for state in Busy:
        if state is not Busy.IDLE:
            assert busy_reason(state)
            assert action_available("rename_session", state)
            assert action_available("cancel", state)
            for action in EXCLUSIVE:
                assert not action_available(action, state), (action, state)
    assert busy_reason(Busy.IDLE) == ""


@settings(max_examples=30, deadline=None)
@given(st.text(max_size=20), st.sampled_from(list(Busy)))
def test_only_the_exclusive_actions_ever_wait(action: str, state: Busy) -> None:
    assert action_available(action, state) == (
        state is Busy.IDLE or action not in EXCLUSIVE_ACTIONS
    )


# --------------------------------------------------------------------------- in the app


async def test_while_a_reply_streams_session_actions_are_hidden_and_do_nothing(
    runtime: Runtime,
) -> None:
    rt, provider = gated(runtime)
    app = make_app(rt)
    async with app.run_test(size=(160, 32)) as pilot:
        await settle(app, pilot)
        assert app.check_action("compact_session", ()) is True
        assert footer_keys(app)["compact_session"] is True
        sessions = len(await runtime.query.list_sessions())

        await pilot.press(*"slow one", "enter")
        await asyncio.wait_for(provider.started.wait(), 5)
        await wait_for(pilot, lambda: app.streaming)
        for action in EXCLUSIVE:
            assert app.check_action(action, ()) is False, action
        assert app.check_action("rename_session", ()) is True
        await wait_for(pilot, lambda: "compact_session" not in footer_keys(app))
        keys = footer_keys(app)
        assert not {"new_session", "delete_session", "answer_again"} & set(keys)
        assert keys["rename_session"] and keys["cancel"]
        assert "Replying… (Esc stops)" in screen_text(app)

        # The keys really do nothing: no question is asked, no session created.
        for key in ("f4", "f8", "ctrl+n", "ctrl+r"):
            await pilot.press(key)
            await pilot.pause(0.05)
            assert not isinstance(app.screen, ConfirmScreen), key
        assert len(await runtime.query.list_sessions()) == sessions
        assert app.streaming and provider.calls == 1

        # The palette runs them directly: each says why it waits, and waits.
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        for title, before in [
            ("New session", "starting a new session"),
            ("Compact session", "compacting"),
            ("Delete session", "deleting"),
            ("Answer again", "answering again"),
        ]:
            app.notice.clear()
            commands[title].callback()
            await pilot.pause(0.05)
            assert app.notice.visible_text == (
                f"Wait for the current reply (or press Esc) before {before}."
            ), title
            assert not isinstance(app.screen, ConfirmScreen), title
        assert len(await runtime.query.list_sessions()) == sessions
        assert app.streaming and provider.calls == 1

        provider.gate.set()
        await send_idle(app, pilot)
        assert app.check_action("compact_session", ()) is True
        await wait_for(pilot, lambda: footer_keys(app)["compact_session"] is True)
        assert app.status.has_class("-idle")
        assert footer_keys(app)["answer_again"] is False  # the reply is stored


async def test_while_compacting_compact_and_send_wait(runtime: Runtime) -> None:
    rt, provider = gated(runtime)
    app = make_app(rt)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        before = len(await runtime.store.read_events("checkout"))
        await pilot.press("f4")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await asyncio.wait_for(provider.started.wait(), 5)  # the summary is being written
        await wait_for(pilot, lambda: app.activity.state is Busy.COMPACTING)
        assert "Compacting…" in screen_text(app)
        for action in EXCLUSIVE:
            assert app.check_action(action, ()) is False, action
        await pilot.press("f4")
        await pilot.pause(0.05)
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.press(*"meanwhile", "enter")
        await wait_for(pilot, lambda: "being compacted" in app.notice.visible_text)
        assert app.composer.draft == "meanwhile"  # kept, not sent
        assert len(await runtime.store.read_events("checkout")) == before

        provider.gate.set()
        await wait_for(pilot, lambda: not app.busy)
        assert provider.calls == 1
        assert app.check_action("compact_session", ()) is True


async def test_without_a_session_rename_compact_delete_are_dimmed(runtime: Runtime) -> None:
    for header in await runtime.query.list_sessions():
        await runtime.store.delete_session(header.id)
    app = make_app(runtime)
    async with app.run_test(size=(160, 32)) as pilot:
        await settle(app, pilot)
        assert app.current_id is None
        for action in ("rename_session", "compact_session", "delete_session", "answer_again"):
            assert app.check_action(action, ()) is None, action
        assert app.check_action("new_session", ()) is True
        await wait_for(pilot, lambda: footer_keys(app).get("rename_session") is False)
        await pilot.press("f2")
        await pilot.pause(0.05)
        assert not isinstance(app.screen, RenameScreen)


async def test_dimmed_keys_come_after_the_lit_ones(runtime: Runtime) -> None:
    """The footer is cut on the right when it does not fit: dimmed keys go last."""
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await wait_for(pilot, lambda: "answer_again" in footer_keys(app))
        lit = list(footer_keys(app).values())
        assert lit == sorted(lit, reverse=True)  # every True before every False
        assert not footer_keys(app)["answer_again"]
        footer = screen_text(app).splitlines()[-1]
        assert "Rename" in footer and "Compact" in footer
