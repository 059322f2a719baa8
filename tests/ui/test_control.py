"""Conversation control in the app (issue 32): retry, edit and resend, fork, on a focused
message or from the palette; the folded history they leave; the fork's lineage in the
sidebar and at the top of its transcript. Real stores (SQLite files, the memory store),
the offline model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widget import Widget

from core.config import DshConfig
from core.control import fork_session
from core.log import (
    ASSISTANT_MESSAGE,
    SESSION_FORK,
    SESSION_PROFILE,
    USER_MESSAGE,
    Event,
    NewEvent,
    Replace,
    assistant_message,
    message_text,
    user_message,
)
from core.providers.offline import OfflineProvider
from stores import MemorySessionStore, SqliteSessionStore
from tests.ui.conftest import FIXED_NOW, MINUTE, SIZE, exchange, make_app, seed, title, workers_done
from tests.ui.snapshots import screen_text
from tests.ui.test_app import HOSTILE_TITLE, mention, settle, wait_for
from tests.ui.transcript_harness import plain, shown_text
from tui.app.app import DshApp
from tui.app.control import EditingBar
from tui.app.transcript.history import HistoryFold, ProfileNote
from tui.app.transcript.transcript import AssistantMessage, UserMessage
from tui.shared.lineage import ForkParent
from tui.shared.runtime import Runtime, open_runtime, profile_event_data


@pytest.fixture(params=["sqlite", "memory"])
async def any_runtime(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Runtime]:
    """The seeded sessions on a SQLite file or in the memory store."""
    path = tmp_path / "control.sqlite3"
    store: Any = (
        await SqliteSessionStore.open(path) if request.param == "sqlite" else MemorySessionStore()
    )
    try:
        await seed(store)
        async with open_runtime(
            DshConfig(database=path), store=store, provider=OfflineProvider()
        ) as rt:
            yield rt
    finally:
        await store.close()


async def idle(app: DshApp, pilot: Pilot[int]) -> None:
    await wait_for(pilot, lambda: not app.busy)
    await workers_done(app)
    await settle(app, pilot)


def items(app: DshApp, kind: type[Widget]) -> list[Any]:
    """The transcript's own items of ``kind`` (not those inside a fold)."""
    return [w for w in app.transcript.item_widgets if isinstance(w, kind)]


async def focus(pilot: Pilot[int], widget: Widget) -> None:
    widget.focus()
    await pilot.pause()


async def expand(app: DshApp, pilot: Pilot[int], fold: HistoryFold) -> str:
    """Expand ``fold``, wait for what it replaced, and give the text it shows."""
    fold.expanded = True
    await wait_for(pilot, lambda: fold.shown_count > 0)
    await settle(app, pilot)
    return shown_text(fold)


def replies(events: list[Event]) -> list[Event]:
    return [e for e in events if e.type == ASSISTANT_MESSAGE]


# --------------------------------------------------------------------------- retry


async def test_retry_shows_the_new_reply_and_the_earlier_attempt_folded(
    any_runtime: Runtime,
) -> None:
    rt = any_runtime
    app = make_app(rt)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await focus(pilot, items(app, AssistantMessage)[-1])
        await pilot.press("r")
        await idle(app, pilot)

        old, new = replies(await rt.store.read_events("checkout"))  # the log holds both
        assert message_text(old.data["message"]).startswith("Yes: one address form")
        assert new.surface_op == Replace(old.seq, old.seq)
        assert new.source_event_seqs == (old.seq,)
        surface = (await rt.query.read_surface("checkout")).events
        assert [e.seq for e in surface] == [1, new.seq]

        (fold,) = items(app, HistoryFold)
        widgets = app.transcript.item_widgets
        assert widgets.index(fold) == widgets.index(items(app, AssistantMessage)[-1]) - 1
        text = screen_text(app)
        assert "▸ Earlier attempt" in text and "Offline model (no network)" in text
        assert "Yes: one address form" not in text  # folded
        assert app.composer.has_focus
        shown = await expand(app, pilot, fold)
        assert "Yes: one address form with a billing differs toggle." in shown
        (earlier,) = fold.query(AssistantMessage)
        assert not earlier.can_focus  # off the surface: nothing acts on it


async def test_retry_from_the_palette_twice_keeps_every_attempt_and_history_works(
    runtime: Runtime,
) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert {"Retry last reply", "Edit last message", "Fork session"} <= titles
        for _ in range(2):
            app.action_retry_reply()  # the composer has focus: the palette's way
            await idle(app, pilot)
        first, second, third = replies(await runtime.store.read_events("checkout"))
        assert second.source_event_seqs == (first.seq,)
        assert third.source_event_seqs == (second.seq,)
        (fold,) = items(app, HistoryFold)
        assert (await expand(app, pilot, fold)).count("Offline model") == 1
        (inner,) = fold.query(HistoryFold)  # the first attempt, folded inside
        assert "Yes: one address form" in await expand(app, pilot, inner)
        # Up on the empty composer still walks the sent messages.
        app.composer.focus()
        await pilot.press("up")
        assert app.composer.draft == "Can we merge shipping and billing?"


async def test_nothing_to_retry_in_an_empty_session_is_said(runtime: Runtime) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("ctrl+n")
        await idle(app, pilot)
        new_id = app.current_id
        assert new_id is not None and new_id != "checkout"
        app.action_retry_reply()
        await idle(app, pilot)
        assert app.notice.visible_text.startswith("Nothing to retry")
        assert await runtime.store.read_events(new_id) == []


async def test_retry_while_another_process_replies_is_refused_and_changes_nothing(
    runtime: Runtime,
) -> None:
    assert await runtime.store.take_reply_lease("checkout", "another process", ttl_ms=60_000)
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        before = await runtime.store.read_events("checkout")
        await focus(pilot, items(app, AssistantMessage)[-1])
        await pilot.press("r")
        await idle(app, pilot)
        notice = app.notice.visible_text
        assert notice.startswith("This session is busy: another window or process")
        assert "Retry when that reply is done." in notice
        assert await runtime.store.read_events("checkout") == before
        assert "Yes: one address form" in screen_text(app)  # the reply is still shown
        assert not items(app, HistoryFold)


# --------------------------------------------------------------------------- edit


async def test_edit_an_earlier_message_sends_its_reference_again_and_folds_the_rest(
    any_runtime: Runtime,
) -> None:
    rt = any_runtime
    app = make_app(rt)
    referenced = "compare with " + mention("scratch", "scratch")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        for draft in (referenced, "and the second?"):
            app.composer.set_draft(draft)
            await pilot.press("enter")
            await idle(app, pilot)
        before = await rt.store.read_events("checkout")
        old_run = [e.seq for e in (await rt.query.read_surface("checkout")).events][2:]
        assert len(old_run) == 5  # card, message, reply, message, reply

        await pilot.press(*"an unsent idea")
        (message,) = [m for m in items(app, UserMessage) if m.text.startswith("compare")]
        await focus(pilot, message)
        await pilot.press("e")
        await wait_for(pilot, lambda: app.composer.draft == referenced)  # the mention rebuilt
        assert app.composer.has_focus
        bar = app.screen.query_one(EditingBar)
        assert bar.display and f"Editing your message #{old_run[1]}" in screen_text(app)
        await pilot.press(*" again", "enter")
        await idle(app, pilot)

        after = (await rt.store.read_events("checkout"))[len(before) :]
        card, edited = after[0], after[1]
        assert card.type == USER_MESSAGE and card.data["source"]["kind"] == "session-reference"
        assert [r["sessionId"] for r in card.data["source"]["references"]] == ["scratch"]
        assert card.surface_op == Replace(old_run[0], old_run[-1])
        assert card.source_event_seqs == tuple(old_run)
        assert message_text(edited.data) == "compare with @scratch again"
        surface = [e.seq for e in (await rt.query.read_surface("checkout")).events]
        assert surface[:4] == [1, 2, card.seq, edited.seq] and len(surface) == 5

        assert not bar.display and app.control.editing is None
        assert app.composer.draft == "an unsent idea"  # the draft from before the edit
        (fold,) = items(app, HistoryFold)
        assert "Edited — 5 earlier messages" in screen_text(app)
        shown = await expand(app, pilot, fold)
        assert "and the second?" in shown and "compare with @scratch" in shown


async def test_the_palette_acts_on_the_focused_message(runtime: Runtime) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await focus(pilot, items(app, UserMessage)[0])
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert {"Edit message #1", "Fork at message #1"} <= titles
        await pilot.press("ctrl+p")
        await pilot.pause(0.3)
        await pilot.press(*"Edit message #1")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.control.editing is not None)
        assert app.control.editing is not None and app.control.editing.seq == 1
        assert app.composer.draft == "Can we merge shipping and billing?"


async def test_escape_cancels_an_edit_and_gives_the_draft_back(runtime: Runtime) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        before = await runtime.store.read_events("checkout")
        await pilot.press(*"half a thought")
        await pilot.press("shift+tab", "up")  # the reply, then the question
        assert isinstance(app.focused, UserMessage)
        await pilot.press("e")
        await wait_for(pilot, lambda: app.control.editing is not None)
        assert app.composer.draft == "Can we merge shipping and billing?"
        await pilot.pause(0.7)  # the drafts file keeps the draft, not the edit
        assert app._drafts.get("checkout") == "half a thought"
        await pilot.press("escape")
        assert app.composer.draft == "half a thought"
        assert app.control.editing is None
        assert not app.screen.query_one(EditingBar).display
        assert await runtime.store.read_events("checkout") == before


async def test_a_failed_edit_keeps_the_edited_draft(runtime: Runtime) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        before = await runtime.store.read_events("checkout")
        await focus(pilot, items(app, UserMessage)[0])
        await pilot.press("e")
        await wait_for(pilot, lambda: app.control.editing is not None)
        broken = "see " + mention("ghost", "Ghost")
        app.composer.set_draft(broken)
        await pilot.press("enter")
        await wait_for(pilot, lambda: bool(app.notice.visible_text))
        assert "SESSION_REFERENCE_READ_FAILED" in app.notice.visible_text
        assert app.composer.draft == broken
        assert app.control.editing is not None  # still editing: fix it, or Esc
        assert await runtime.store.read_events("checkout") == before

        # Meanwhile another window compacts the session: the message is gone from it.
        other = await runtime.chat("checkout")
        await other.compact()
        app.composer.set_draft("a better question")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "not a message of the current" in app.notice.visible_text)
        assert app.notice.visible_text.startswith("Could not resend the edited message")
        assert app.composer.draft == "a better question"
        assert app.control.editing is not None
        await pilot.press("escape")
        assert app.composer.draft == ""


# --------------------------------------------------------------------------- fork


async def test_fork_opens_a_new_session_up_to_the_message_with_its_lineage(
    any_runtime: Runtime,
) -> None:
    rt = any_runtime
    profile = profile_event_data(rt.config.profile("offline"))
    await rt.store.append("checkout", SESSION_PROFILE, profile)
    await rt.store.append_batch(
        "checkout", exchange("And the tax field?", "Keep it.", 2, FIXED_NOW - 10 * MINUTE)
    )
    app = make_app(rt)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert plain(items(app, ProfileNote)[0]) == "Profile → offline · offline · echo-1"
        first_reply = items(app, AssistantMessage)[0]
        await focus(pilot, first_reply)
        await pilot.press("f")
        await wait_for(pilot, lambda: app.current_id not in (None, "checkout"))
        await idle(app, pilot)
        fork_id = app.current_id
        assert fork_id is not None

        log = await rt.store.read_events(fork_id)
        assert log[0].type == SESSION_FORK and log[0].data == {
            "parent": {"id": "checkout", "seq": 2}
        }
        assert [e.data for e in log if e.type == SESSION_PROFILE] == [profile]
        surface = (await rt.query.read_surface(fork_id)).events
        assert [message_text(e.data.get("message", e.data)) for e in surface] == [
            "Can we merge shipping and billing?",
            "Yes: one address form with a **billing differs** toggle.",
        ]
        assert len(items(app, UserMessage)) == 1 and len(items(app, AssistantMessage)) == 1

        sidebar = app.sidebar
        entry = sidebar.entry(fork_id)
        assert entry is not None and entry.parent == ForkParent("checkout", 2)
        assert sidebar.visible_ids[0] == fork_id  # newest activity first, as any session
        assert sidebar.option_list.highlighted == 0
        label, detail = sidebar.row_lines(0)
        assert label.plain.startswith("● ↳ Fork of Checkout redesign")
        assert detail.plain.startswith("  just now · of Checkout redesign · /home/dev")
        parent_row = sidebar.row_lines(sidebar.visible_ids.index("checkout"))
        assert "↳" not in parent_row[0].plain

        banner = app.transcript.origin_banner
        assert banner.display
        assert "↳ Forked from Checkout redesign at message #2" in screen_text(app)
        await focus(pilot, banner)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.current_id == "checkout")
        assert not app.transcript.origin_banner.display


async def test_fork_banner_stays_after_a_retry_in_the_fork(runtime: Runtime) -> None:
    """The fork's origin is not one of the log-only items a replace hides."""
    header = await fork_session(runtime.store, runtime.query, "checkout")
    app = make_app(runtime, initial_session=header.id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.transcript.origin_banner.display
        app.action_retry_reply()
        await idle(app, pilot)
        assert items(app, HistoryFold)
        assert app.transcript.origin_banner.display
        assert "Forked from Checkout redesign at message #2" in screen_text(app)


# --------------------------------------------------------------------------- keys


async def test_messages_take_focus_and_offer_their_keys(runtime: Runtime) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("shift+tab")
        assert isinstance(app.focused, AssistantMessage)
        footer = screen_text(app).splitlines()[-1]
        assert footer.startswith("r Retry f Fork")  # Edit is dimmed: not your message
        assert app.check_action("edit_message", ()) is None
        await pilot.press("up")
        assert isinstance(app.focused, UserMessage)
        assert screen_text(app).splitlines()[-1].startswith("r Retry e Edit f Fork")
        assert app.check_action("edit_message", ()) is True
        await pilot.press("up")  # the first item: the view scrolls, the focus stays
        assert isinstance(app.focused, UserMessage)
        await pilot.press("down", "down")  # past the newest message: the composer
        assert app.composer.has_focus
        await pilot.press("ctrl+up")
        assert isinstance(app.focused, AssistantMessage)
        await pilot.press("x")  # typing on a message types in the composer
        assert app.composer.has_focus and app.composer.draft == "x"
        await pilot.press("ctrl+up", "escape")
        assert app.composer.has_focus


async def test_controls_are_dimmed_on_a_read_only_database(tmp_path: Path) -> None:
    path = tmp_path / "ro.sqlite3"
    writable = await SqliteSessionStore.open(path)
    await seed(writable)
    await writable.close()
    store = await SqliteSessionStore.open(path, read_only=True)
    async with open_runtime(
        DshConfig(database=path), store=store, provider=OfflineProvider()
    ) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await focus(pilot, items(app, UserMessage)[0])
            for action in ("retry_reply", "edit_message", "fork_session"):
                assert app.check_action(action, ()) is None
            app.action_fork_session()
            await pilot.pause()
            assert "read-only" in app.notice.visible_text
            assert len(await rt.query.list_sessions()) == 4
    await store.close()


# --------------------------------------------------------------------------- hostile text

HOSTILE_OLD = "[bold red]OLD[/] \x1b[31mred\x1b[0m \u202eevil [link=https://x.invalid]x[/link]"


async def test_hostile_text_in_folds_and_lineage_is_escaped(runtime: Runtime) -> None:
    store = runtime.store
    sid = "hostile-[b]x[/b]"
    await store.create_session(sid, cwd="/tmp/[red]cwd[/red]", created_at=FIXED_NOW - MINUTE)
    at = FIXED_NOW - MINUTE
    old = assistant_message(HOSTILE_OLD, provider="offline", model="[i]m[/i]", id="old")
    new = assistant_message("the new reply", provider="offline", model="echo-1", id="new")
    await store.append_batch(
        sid,
        [
            title(HOSTILE_TITLE, at),
            NewEvent(USER_MESSAGE, user_message("ask [b]me[/b]\x1b[2J"), "append", time=at),
            NewEvent(ASSISTANT_MESSAGE, {"turn": 1, "step": 0, "message": old}, "append", time=at),
        ],
    )
    await store.append(
        sid,
        ASSISTANT_MESSAGE,
        {"turn": 2, "step": 0, "message": new},
        surface_op=Replace(2, 2),
        source_event_seqs=[2],
    )
    await store.append(sid, SESSION_PROFILE, {"profile": "[b]p[/b]\x1b[31m", "model": "\u202em"})
    fork = await fork_session(store, runtime.query, sid, at_seq=1)
    app = make_app(runtime, initial_session=sid)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        (fold,) = items(app, HistoryFold)
        shown = await expand(app, pilot, fold)
        assert "[bold red]OLD[/]" in shown and "\\x1b[31mred" in shown and "\\u202eevil" in shown
        note = plain(items(app, ProfileNote)[0])
        assert note == "Profile → [b]p[/b]\\x1b[31m · \\u202em"
        text = screen_text(app)
        assert "[bold red]OLD[/]" in text and "[link=https://x.invalid]x[/link]" in text
        await app.open_session(fork.id)
        await settle(app, pilot)
        banner = plain(app.transcript.origin_banner)
        assert banner.startswith("↳ Forked from [bold red]PWNED[/] \\x1b[31mred")
        svg = app.export_screenshot()
        assert "\x1b" not in svg and "\u202e" not in svg
        entry = app.sidebar.entry(fork.id)
        assert entry is not None and entry.parent == ForkParent(sid, 1)
        _label, detail = app.sidebar.row_lines(app.sidebar.visible_ids.index(fork.id))
        assert "· of [bold red]PWNED[/] \\x1b… · /tmp/[red]cwd[" in detail.plain
        await asyncio.sleep(0)


def test_the_fork_banner_and_lineage_read_only_well_formed_events() -> None:
    from tui.shared.lineage import fork_parent

    def fork_event(data: Any) -> Event:
        return Event(0, SESSION_FORK, 0, data)

    assert fork_parent(fork_event({"parent": {"id": "p", "seq": 3}})) == ForkParent("p", 3)
    for bad in (
        {},
        {"parent": "p"},
        {"parent": {"id": 1, "seq": 3}},
        {"parent": {"id": "p", "seq": True}},
    ):
        assert fork_parent(fork_event(bad)) is None


async def test_an_edit_and_a_fork_banner_end_with_the_last_session(runtime: Runtime) -> None:
    header = await fork_session(runtime.store, runtime.query, "checkout")
    for session_id in ("checkout", "k8s-upgrade", "search-tuning", "scratch"):
        await runtime.store.delete_session(session_id)
    app = make_app(runtime, initial_session=header.id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await workers_done(app)
        banner = app.transcript.origin_banner
        assert banner.display  # the parent is gone: named by its id
        assert plain(banner).startswith("↳ Forked from checkout at message #2 (not in your")
        await pilot.press(*"kept")
        await focus(pilot, items(app, UserMessage)[0])
        await pilot.press("e")
        await wait_for(pilot, lambda: app.control.editing is not None)
        await runtime.store.delete_session(header.id)  # elsewhere: no session is left
        await app.session_deleted_elsewhere(header.id)
        await settle(app, pilot)
        assert app.current_id is None
        assert app.control.editing is None and app.composer.draft == "kept"
        assert not app.screen.query_one(EditingBar).display
        assert not banner.display and app.transcript.empty_state.display


async def test_a_worker_replaced_before_it_starts_leaves_no_coroutine_unawaited(
    runtime: Runtime,
) -> None:
    """Each listing starts the lineage read in an exclusive worker: a newer one cancels
    one that has not started yet. The app gives workers functions, not coroutines, so
    nothing is left that Python would warn was never awaited."""
    import gc
    import warnings

    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        headers = await runtime.store.list_headers()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(5):  # each cancels the one before, before it ran
                app.control.read_lineage(headers)
            await workers_done(app)
            await settle(app, pilot)
            gc.collect()
        unawaited = [w for w in caught if "was never awaited" in str(w.message)]
        assert unawaited == []
