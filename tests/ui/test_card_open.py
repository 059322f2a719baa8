"""Issue 32, point 4: from a reference card to its source. ``o`` on a focused card, a
source's "Open session" button, and the palette's "Open referenced session: …" entries
switch to a source that is still readable, the sidebar's way; a deleted (or no longer
shared: tests/sharing/test_tui_card_sources.py) source is said in one line naming it,
escaped, and the app stays where it was."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from textual.command import CommandInput, CommandList, CommandPalette
from textual.content import Content
from textual.pilot import Pilot
from textual.widgets import Button

from core.config import DshConfig
from core.display import single_line
from core.log import USER_MESSAGE, NewEvent, text_block, user_message
from core.providers.offline import OfflineProvider
from core.references import SessionReferenceInput
from stores import MemorySessionStore
from tests.ui.conftest import FIXED_NOW, SIZE, make_app
from tests.ui.snapshots import assert_snapshot, pinned_environment, screen_text
from tests.ui.test_app import mention, send_idle, settle, wait_for
from tui.app.app import SOURCE_GONE, DshApp
from tui.app.commands import OPEN_REFERENCED
from tui.app.transcript.cards import OPEN_SESSION, ReferenceCard
from tui.shared.runtime import Runtime, open_runtime

__all__ = ["pinned_environment"]  # autouse: the snapshot below is drawn in it

SEARCH = "Search relevance (search-tuning)"
"""How the palette and the notices name the seeded source ``search-tuning``."""


async def add_card(rt: Runtime, target: str, references: Sequence[SessionReferenceInput]) -> None:
    """Deliver a message with references into ``target`` as SPEC §5 does (one batch)."""
    header = await rt.store.read_header(target)
    prepared = await rt.service.prepare(header, [text_block("see these")], references)
    assert prepared.additional_context is not None
    await rt.store.append_batch(
        target,
        [
            NewEvent(USER_MESSAGE, prepared.additional_context, "append"),
            NewEvent(USER_MESSAGE, user_message(prepared.content), "append"),
        ],
    )


async def card_of(app: DshApp, pilot: Pilot[int]) -> ReferenceCard:
    await settle(app, pilot)
    return app.transcript.query_one(ReferenceCard)


def palette_entries(app: DshApp) -> list[str]:
    if not isinstance(app.screen, CommandPalette):
        return []
    prompts = [option.prompt for option in app.screen.query_one(CommandList).options]
    return [p.plain.split("\n")[0] for p in prompts if isinstance(p, Content)]


def assert_open_in_sidebar(app: DshApp, session_id: str) -> None:
    sidebar = app.sidebar
    assert sidebar.current_id == session_id
    assert sidebar.option_list.highlighted == sidebar.visible_ids.index(session_id)


# --------------------------------------------------------------------------- readable


async def test_o_on_a_focused_card_opens_its_source(runtime: Runtime) -> None:
    await add_card(
        runtime, "checkout", [SessionReferenceInput("search-tuning", "Search relevance")]
    )
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        card = await card_of(app, pilot)
        assert app.current_id == "checkout" and not card.expanded
        card.focus()
        await wait_for(pilot, lambda: "o Open session" in screen_text(app).splitlines()[-1])
        await pilot.press("o")  # collapsed: the key works all the same
        await wait_for(pilot, lambda: app.current_id == "search-tuning")
        await settle(app, pilot)
        assert_open_in_sidebar(app, "search-tuning")
        assert "Why are exact matches ranked low?" in screen_text(app)
        assert app.composer.has_focus  # typing goes on in the composer, as after the sidebar
        assert app.notice.visible_text == ""


async def test_several_sources_o_asks_which_and_each_button_opens_its_own(
    runtime: Runtime,
) -> None:
    refs = [
        SessionReferenceInput("search-tuning", "Search relevance"),
        SessionReferenceInput("scratch"),
    ]
    await add_card(runtime, "checkout", refs)
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        card = await card_of(app, pilot)
        card.focus()
        await pilot.press("o")
        await wait_for(pilot, lambda: len(palette_entries(app)) == 2)
        assert palette_entries(app) == [
            f"{OPEN_REFERENCED}: {SEARCH}",
            f"{OPEN_REFERENCED}: scratch",
        ]
        await pilot.press("escape")  # changed their mind: nothing opens
        await wait_for(pilot, lambda: not isinstance(app.screen, CommandPalette))
        assert app.current_id == "checkout" and card.has_focus
        await pilot.press("o")
        await wait_for(pilot, lambda: len(palette_entries(app)) == 2)
        await pilot.press(*"scratch", "enter")
        await wait_for(pilot, lambda: app.current_id == "scratch")
        assert_open_in_sidebar(app, "scratch")

        # Back to the card: expanded, every source has its own button (mouse and keyboard).
        app.switch_to("checkout")
        await wait_for(pilot, lambda: app.current_id == "checkout")
        card = await card_of(app, pilot)
        card.expanded = True
        await settle(app, pilot)
        buttons = list(card.query(".card-open-source").results(Button))
        assert [str(b.label) for b in buttons] == [OPEN_SESSION, OPEN_SESSION]
        app.transcript.scroll_to_widget(buttons[0], animate=False)
        await pilot.pause(0.1)
        await pilot.click(buttons[0])
        await wait_for(pilot, lambda: app.current_id == "search-tuning")
        assert_open_in_sidebar(app, "search-tuning")

        app.switch_to("checkout")
        await wait_for(pilot, lambda: app.current_id == "checkout")
        card = await card_of(app, pilot)
        card.expanded = True
        await settle(app, pilot)
        second = list(card.query(".card-open-source").results(Button))[1]
        second.focus()
        await pilot.press("o")  # on a source's button: that source, no question
        await wait_for(pilot, lambda: app.current_id == "scratch")
        assert not isinstance(app.screen, CommandPalette)


async def test_the_palette_offers_the_focused_cards_sources_only(runtime: Runtime) -> None:
    await add_card(
        runtime, "checkout", [SessionReferenceInput("search-tuning", "Search relevance")]
    )
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await card_of(app, pilot)
        await pilot.press("ctrl+p")  # the composer has focus: no card, no entry
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"Open referenced")
        await pilot.pause(0.5)
        assert not [e for e in palette_entries(app) if e.startswith(OPEN_REFERENCED)]
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, CommandPalette))

        app.transcript.query_one(ReferenceCard).focus()
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"Open referenced")
        entry = f"{OPEN_REFERENCED}: {SEARCH}"
        await wait_for(pilot, lambda: entry in palette_entries(app))
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.current_id == "search-tuning")
        assert_open_in_sidebar(app, "search-tuning")


# --------------------------------------------------------------------------- not readable


async def test_a_deleted_source_is_said_and_the_app_stays(runtime: Runtime) -> None:
    refs = [
        SessionReferenceInput("scratch"),
        SessionReferenceInput("search-tuning", "Search relevance"),
    ]
    await add_card(runtime, "checkout", refs)
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        card = await card_of(app, pilot)
        await runtime.store.delete_session("scratch")  # elsewhere: the list still shows it
        card.expanded = True
        await settle(app, pilot)
        first = card.query(".card-open-source").first(Button)
        first.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.notice.visible_text != "")
        assert app.notice.visible_text == f"{SOURCE_GONE}: scratch."
        assert app.current_id == "checkout"
        assert_open_in_sidebar(app, "checkout")
        assert "scratch" not in app.sidebar.visible_ids  # the list is read again
        assert first.has_focus  # the other source is one key away
        assert SOURCE_GONE in screen_text(app)

        # The palette says the same, and the other source still opens.
        card.focus()
        await pilot.press("o")
        await wait_for(pilot, lambda: len(palette_entries(app)) == 2)
        await pilot.press("enter")  # the first entry: scratch
        await wait_for(pilot, lambda: not isinstance(app.screen, CommandPalette))
        await pilot.pause(0.2)
        assert app.current_id == "checkout"
        assert app.notice.visible_text == f"{SOURCE_GONE}: scratch."
        await pilot.press("o", "down", "enter")
        await wait_for(pilot, lambda: app.current_id == "search-tuning")
        assert app.notice.visible_text == ""


HOSTILE_LABEL = "[bold]x[/] [link=x]y[/link] \x1b[31mred \u202erev\x00"
HOSTILE_ID = "gone-[b]id[/b]\x1b]0;t\x07"


@pytest.fixture
async def memory_runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    config = DshConfig(database=tmp_path / "unused.sqlite3")
    async with open_runtime(config, store=MemorySessionStore(), provider=OfflineProvider()) as rt:
        yield rt


async def test_a_hostile_label_and_id_are_shown_literally(memory_runtime: Runtime) -> None:
    """On the memory store: the source's label and id go through the display rules
    (escaped control characters, markup shown as typed) in the palette and the notice."""
    store = memory_runtime.store
    await store.create_session(HOSTILE_ID, created_at=FIXED_NOW - 2000)
    await store.append(HOSTILE_ID, USER_MESSAGE, user_message("remember me"), surface_op="append")
    await store.create_session("target", created_at=FIXED_NOW - 1000)
    await add_card(memory_runtime, "target", [SessionReferenceInput(HOSTILE_ID, HOSTILE_LABEL)])
    await store.delete_session(HOSTILE_ID)
    named = f"{single_line(HOSTILE_LABEL)} ({single_line(HOSTILE_ID)})"
    assert "\\x1b[31mred" in named and "\\u202erev\\x00" in named and "\\x07" in named
    app = make_app(memory_runtime)
    async with app.run_test(size=(140, 32)) as pilot:
        card = await card_of(app, pilot)
        assert app.current_id == "target"
        card.focus()
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"Open referenced")
        await wait_for(pilot, lambda: bool(palette_entries(app)))
        assert palette_entries(app)[0] == f"{OPEN_REFERENCED}: {named}"
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.notice.visible_text != "")
        assert app.notice.visible_text == f"{SOURCE_GONE}: {named}."
        assert app.current_id == "target"
        shown = screen_text(app)
        for raw in ("\x1b", "\x07", "\x00", "\u202e"):
            assert raw not in shown
        assert "[bold]x[/] [link=x]y[/link] \\x1b[31mred" in shown
        assert "gone-[b]id[/b]\\x1b]0;t\\x07" in shown


async def test_a_card_that_names_no_session_has_the_key_dimmed(memory_runtime: Runtime) -> None:
    """A damaged (imported) snapshot whose source holds no id: nothing to open, no button."""
    store = memory_runtime.store
    await store.create_session("target", created_at=FIXED_NOW - 1000)
    source = {"kind": "session-reference", "version": 1, "references": [{"label": "lost"}]}
    damaged = user_message("## Referenced sessions\n\nnothing", source=source)
    await store.append("target", USER_MESSAGE, damaged, surface_op="append")
    app = make_app(memory_runtime)
    async with app.run_test(size=SIZE) as pilot:
        card = await card_of(app, pilot)
        assert card.openable == ()
        card.focus()
        card.expanded = True
        await settle(app, pilot)
        assert not card.query(".card-open-source")
        assert card.check_action("open_source", ()) is None
        await pilot.press("o")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, CommandPalette) and app.current_id == "target"


async def test_the_current_session_is_not_opened_again(runtime: Runtime) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.open_referenced_session("checkout", "Checkout redesign")
        await pilot.pause(0.2)
        assert [n.message for n in app._notifications] == [
            "Checkout redesign is the session already open."
        ]
        assert app.current_id == "checkout"


async def test_a_card_made_in_the_app_opens_its_source(runtime: Runtime) -> None:
    """The whole way round: @-mention, send, then from the card to the source."""
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.composer.set_draft("see " + mention("k8s-upgrade", "Kubernetes upgrade"))
        await pilot.press("enter")
        await send_idle(app, pilot)
        app.transcript.query_one(ReferenceCard).focus()
        await pilot.press("o")
        await wait_for(pilot, lambda: app.current_id == "k8s-upgrade")
        assert_open_in_sidebar(app, "k8s-upgrade")


# --------------------------------------------------------------------------- snapshot


async def test_snapshot_the_chooser_of_a_card_with_two_sources(
    runtime: Runtime, request: pytest.FixtureRequest
) -> None:
    refs = [
        SessionReferenceInput("search-tuning", "Search relevance"),
        SessionReferenceInput("scratch"),
    ]
    await add_card(runtime, "checkout", refs)
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        card = await card_of(app, pilot)
        card.expanded = True
        card.focus()
        await settle(app, pilot)
        app.transcript.scroll_to_widget(card, animate=False, top=True)
        await pilot.press("o")
        await wait_for(pilot, lambda: len(palette_entries(app)) == 2)
        app.screen.query_one(CommandInput).cursor_blink = False  # (the cursor stays shown)
        await pilot.pause(0.3)
        assert_snapshot(request, app, "app_card_open_chooser")
