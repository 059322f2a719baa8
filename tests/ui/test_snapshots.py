"""SVG snapshot tests of the UI (baselines in the top-level ``snapshots/`` folder).

Every test here runs in a pinned environment (``pinned_environment`` of ``tests/ui/snapshots.py``): no ``NO_COLOR`` or
``TEXTUAL_*`` variables, UTC, the frozen clock of ``conftest.frozen_clock``, the default
theme and a fixed terminal size. A baseline is written only with ``--snapshot-update``
after looking at it (see ``tests/ui/snapshots.py``).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from core.references import SessionReferenceService
from stores import SqliteSessionStore
from tests.ui.conftest import SIZE, make_app, workers_done
from tests.ui.snapshots import assert_snapshot, pinned_environment, screen_text
from tests.ui.test_app import (
    gated_runtime,
    mention,
    seed_hostile,
    send_idle,
    settle,
    svg_text,
    wait_for,
)
from tests.ui.test_newcomer import _with_card, screen_lines
from tests.ui.transcript_harness import TranscriptApp, assistant, new_session, user
from tests.ui.transcript_harness import settle as settle_transcript
from tui.app.screens.help import HelpScreen
from tui.app.transcript.cards import ReferenceCard
from tui.app.transcript.transcript import EMPTY_STATE_TITLE, AssistantMessage, ReplyView
from tui.shared.runtime import Runtime

__all__ = ["pinned_environment"]  # autouse: every test here is drawn in it

REPLY_SIZE = (100, 40)


def test_the_environment_is_pinned() -> None:
    assert "NO_COLOR" not in os.environ
    assert not [name for name in os.environ if name.startswith("TEXTUAL_")]
    assert os.environ["TZ"] == "UTC" and time.strftime("%Z") == "UTC"


# --------------------------------------------------------------------------- replies

REPLY = (
    "# Plan\n\n"
    "Merge the **shipping** and *billing* forms; keep `AddressForm` as it is.\n\n"
    "## Steps\n\n"
    "1. one address form\n"
    "2. a toggle: <b>billing differs</b>\n\n"
    "- raw tags stay text: </referenced-sessions> <script>alert(1)</script>\n"
    "- a [link](https://example.com/docs) is never a terminal hyperlink\n\n"
    "> quoted: the old form\n\n"
    "| field | kept |\n|---|---|\n| street | yes |\n\n"
    "```python\ndef form():\n    return 'one'\n```\n\n"
    "---\n\n"
    "Control characters are escaped: \x1b[31mred\x1b[0m\n"
)


async def test_a_reply_looks_the_same_streamed_and_reloaded(
    request: pytest.FixtureRequest,
) -> None:
    """A streamed reply and the same reply replayed from the store are one layout: both
    bodies are ``reply_body`` (a Textual ``Markdown`` while streaming drew another)."""
    session = await new_session()
    asked = await session.append(user("How do we merge the forms?"))
    app = TranscriptApp([])
    async with app.run_test(size=REPLY_SIZE) as pilot:
        await settle_transcript(pilot)
        transcript = app.transcript
        await transcript.add_events(asked)
        view = transcript.begin_reply()
        await pilot.pause()
        for start in range(0, len(REPLY), 7):
            view.append("text", REPLY[start : start + 7])
            if start % 70 == 0:
                await pilot.pause()  # several flushes, each over a partial reply
        stored = await session.append(assistant(REPLY, finish="completed"))
        await view.finish("completed", event=stored[0])
        await transcript.add_events(stored)
        await settle_transcript(pilot)
        assert [type(w) for w in transcript.item_widgets][-1] is ReplyView
        streamed_svg = app.export_screenshot(title="dsh")
        streamed_text = screen_text(app)

        await transcript.load(await session.surface())
        await settle_transcript(pilot)
        assert [type(w) for w in transcript.item_widgets][-1] is AssistantMessage
        assert screen_text(app) == streamed_text
        assert app.export_screenshot(title="dsh") == streamed_svg
        for shown in ("</referenced-sessions>", "<script>alert(1)</script>", "<b>billing"):
            assert shown in streamed_text
        assert "\\x1b[31mred" in streamed_text
        assert "https://example.com/docs" in streamed_text  # the address printed as text
        assert "\x1b]8;" not in streamed_svg  # no OSC 8 hyperlink
        assert_snapshot(request, app, "transcript_reply_streamed_and_reloaded")


# ----------------------------------------------------------- from test_app.py


async def test_opens_newest_session_with_list_header_and_footer(
    runtime: Runtime, request: pytest.FixtureRequest
) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.current_id == "checkout"
        sidebar = app.sidebar
        assert sidebar.visible_ids == ["checkout", "k8s-upgrade", "search-tuning", "scratch"]
        assert sidebar.option_list.highlighted == 0
        svg = screen_text(app)
        for expected in [
            "Checkout redesign",
            "2d ago",
            "/home/dev/shop",
            "no cwd",
            "echo-1",
            "Rename",
            "Sessions",
        ]:
            assert expected.replace(" ", "&#160;") in svg or expected in svg
        assert app.composer.has_focus
        assert_snapshot(request, app, "app_session_open")


async def test_empty_state_for_a_newcomer(
    store: SqliteSessionStore, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from core.config import DshConfig
    from core.providers.offline import OfflineProvider
    from tui.shared.runtime import open_runtime

    async with open_runtime(
        DshConfig(database=tmp_path / "ui.sqlite3"), store=store, provider=OfflineProvider()
    ) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert app.current_id is None
            svg = screen_text(app)
            assert EMPTY_STATE_TITLE in svg and "Type @ to reference" in svg
            assert_snapshot(request, app, "app_empty_state")
            # typing a first message creates a session for it
            await pilot.press(*"first words", "enter")
            await send_idle(app, pilot)
            assert app.current_id is not None
            events = await rt.store.read_events(app.current_id)
            assert events[0].data["content"][0]["text"] == "first words"


async def test_narrow_and_wide_terminals(runtime: Runtime, request: pytest.FixtureRequest) -> None:
    app = make_app(runtime)
    async with app.run_test(size=(60, 30)) as pilot:
        await settle(app, pilot)
        assert app.sidebar.has_class("-hidden"), "the sidebar starts hidden at 60 columns"
        await pilot.press(*"hi @")
        await wait_for(
            pilot, lambda: app.composer.picker_open and bool(app.composer.picker.row_texts)
        )
        await pilot.press("escape")
        assert_snapshot(request, app, "app_60_columns")
        await pilot.press("ctrl+b")
        assert not app.sidebar.has_class("-hidden")
    app = make_app(runtime)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(app, pilot)
        assert not app.sidebar.has_class("-hidden")
        await pilot.press(*"wide screen", "enter")
        await send_idle(app, pilot)
        assert app.transcript.last_reply_text() is not None


async def test_picker_open_with_candidates(
    runtime: Runtime, request: pytest.FixtureRequest
) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press(*"compare with @")
        await wait_for(pilot, lambda: len(app.composer.picker.row_texts) == 3)
        rows = app.composer.picker.row_texts
        # same cwd first, then no cwd, then other cwd; never the current session
        assert [r.split()[0] for r in rows] == ["Search", "scratch", "Kubernetes"]
        assert not any("Checkout" in r for r in rows)
        assert_snapshot(request, app, "app_picker_open")
        await pilot.press("k")
        # The id/title match first, then the body match (issue 18): "ranked" holds a "k".
        await wait_for(pilot, lambda: len(app.composer.picker.row_texts) == 2)
        rows = app.composer.picker.row_texts
        assert rows[0].startswith("Kubernetes") and "ranked" in rows[1]
        await pilot.press("tab")
        assert (
            app.composer.draft
            == "compare with " + mention("k8s-upgrade", "Kubernetes upgrade") + " "
        )


async def test_draft_with_two_mentions(runtime: Runtime, request: pytest.FixtureRequest) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        for letters in ("sea", "kub"):
            await pilot.press("@", *letters)
            await wait_for(pilot, lambda: len(app.composer.picker.row_texts) == 1)
            await pilot.press("enter")
        await pilot.press(*"what changed?")
        assert app.composer.reference_count == 2
        await settle(app, pilot)  # the meter counts the references (issue 32)
        assert app.status.meter_text.startswith("2 references · ")
        assert_snapshot(request, app, "app_draft_two_mentions")
        # Backspace right after a mention removes it whole
        app.composer.set_draft("see " + mention("scratch", "scratch"))
        await pilot.press("backspace")
        assert app.composer.draft == "see "


async def test_send_with_references_shows_card_message_and_reply(
    runtime: Runtime, request: pytest.FixtureRequest
) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.composer.set_draft(
            "compare "
            + mention("search-tuning", "Search relevance")
            + " and "
            + mention("scratch", "scratch")
            + " please"
        )
        await pilot.press("enter")
        await send_idle(app, pilot)
        events = await runtime.store.read_events("checkout")
        snapshot, direct = events[3], events[4]
        assert snapshot.data["source"]["kind"] == "session-reference"
        assert direct.data["content"][0]["text"] == "compare @Search relevance and @scratch please"
        cards = list(app.transcript.query(ReferenceCard))
        assert len(cards) == 1 and not cards[0].expanded
        svg = screen_text(app)
        assert "Referenced sessions · Search relevance, scratch" in svg
        assert "3/3 messages kept" in svg or "4/4 messages kept" in svg
        assert "- Search relevance: 2 messages received" in (app.transcript.last_reply_text() or "")
        assert app.composer.draft == ""
        assert app.composer.sent_history[-1].startswith("compare @[Search relevance]")
        assert_snapshot(request, app, "app_card_collapsed")

        card = cards[0]
        card.expanded = True
        await pilot.pause()
        card.action_toggle_conversation()
        await settle(app, pilot)
        app.transcript.scroll_to_widget(card, animate=False, top=True)
        await pilot.pause(0.2)
        svg = screen_text(app)
        for expected in ["search-tuning", "captured through", "omitted"]:
            assert expected in svg, expected
        assert_snapshot(request, app, "app_card_expanded")
        # What the model received follows the sources' details, below the fold at 100x32.
        conversation = card._conversation
        assert conversation is not None
        app.transcript.scroll_to_widget(conversation, animate=False, top=True)
        await pilot.pause(0.2)
        assert "user: Why are exact matches ranked low?" in screen_text(app)


async def test_preparing_status_and_esc_cancels(
    runtime: Runtime, request: pytest.FixtureRequest
) -> None:
    rt, query = gated_runtime(runtime, {"search-tuning"})
    app = make_app(rt)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        draft = "look at " + mention("search-tuning", "Search relevance")
        app.composer.set_draft(draft)
        await pilot.press("enter")
        await asyncio.wait_for(query.started.wait(), 5)
        await pilot.pause()
        assert app.preparing and not app.composer.send_enabled
        svg = screen_text(app)
        assert "Preparing 1 referenced session…" in svg
        assert_snapshot(request, app, "app_preparing")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.preparing)
        assert app.composer.draft == draft, "the draft stays"
        assert "SESSION_REFERENCE_CANCELLED" in app.notice.visible_text
        assert len(await runtime.store.read_events("checkout")) == 3, "nothing appended"


async def test_budget_error_notice_snapshot(
    runtime: Runtime, request: pytest.FixtureRequest
) -> None:
    from core.references import SessionReferenceConfig

    service = SessionReferenceService(
        runtime.query, SessionReferenceConfig(max_reference_bytes=120)
    )
    rt = Runtime(runtime.config, runtime.store, runtime.query, service, runtime.provider)
    app = make_app(rt)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.composer.set_draft("see " + mention("k8s-upgrade", "Kubernetes upgrade"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: bool(app.notice.visible_text))
        assert (
            "too large" in app.notice.visible_text
            and "SESSION_REFERENCE_BUDGET_EXCEEDED" in app.notice.visible_text
        )
        await settle(app, pilot)  # the draft is back: the meter says why too (issue 32)
        assert app.status.meter_text.startswith("References: the referenced session")
        assert_snapshot(request, app, "app_error_notice")


async def test_hostile_session_is_shown_literally(
    runtime: Runtime, request: pytest.FixtureRequest
) -> None:
    await seed_hostile(runtime.store)
    app = make_app(runtime, initial_session="hostile-[b]x[/b]")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        raw = svg_text(app)
        assert "\x1b" not in raw and "\u202e" not in raw
        svg = screen_text(app)
        for literal in [
            "[bold red]PWNED[/]",
            "\\x1b[31mred",
            "\\u202eevil",
            "[bold]x[/bold]",
            "[link=https://example.invalid]click[/link]",
            "</referenced-sessions>",
            "<script>",
            "steer [i]this[/i]",
        ]:
            assert literal in svg, literal
        assert_snapshot(request, app, "app_hostile_session")
        # the picker shows the hostile title literally too
        await app.open_session("checkout")
        await pilot.press("@", *"pwn")
        await wait_for(pilot, lambda: len(app.composer.picker.row_texts) == 1)
        row = app.composer.picker.row_texts[0]
        assert "[bold red]PWNED[/]" in row and "\x1b" not in row
        await pilot.press("enter")
        assert "dsh-session:" in app.composer.draft
        await pilot.press("enter")
        await send_idle(app, pilot)
        sent = await runtime.store.read_events("checkout")
        assert sent[3].data["source"]["references"][0]["sessionId"] == "hostile-[b]x[/b]"


# ----------------------------------------------------------- from test_newcomer.py


async def test_filter_text_is_visible_while_it_has_focus(
    runtime: Runtime, request: pytest.FixtureRequest
) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("ctrl+l")
        assert app.sidebar.filter_input.has_focus
        await pilot.press(*"shop")
        await pilot.pause()
        assert app.sidebar.visible_ids == ["checkout", "search-tuning"]
        assert app.sidebar.filter_input.content_region.height >= 1
        assert "shop" in screen_lines(app)[2][:34], screen_lines(app)[2]
        assert_snapshot(request, app, "app_sidebar_filter_text")


async def test_focused_card_is_visible_keys_go_to_composer_and_esc_returns(
    runtime: Runtime, request: pytest.FixtureRequest
) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        card = await _with_card(app, pilot)
        before = app.export_screenshot()
        card.focus()
        await pilot.pause()
        assert card.has_focus
        # The footer recomposes for the card's keys a refresh or two later.
        await wait_for(pilot, lambda: "Expand/collapse" in screen_text(app).splitlines()[-1])
        assert app.export_screenshot() != before, "focus must change how the card looks"
        assert_snapshot(request, app, "app_card_focused")
        await pilot.press(*"hi")  # (not v or o: the card's own keys)
        assert app.composer.has_focus
        assert app.composer.draft == "hi"
        app.composer.set_draft("hi ")
        card.focus()
        await pilot.pause()
        await pilot.press("space", "@")  # the card's own key, then one for the composer
        assert card.expanded
        await wait_for(pilot, lambda: app.composer.picker_open)
        assert app.composer.draft == "hi @"
        await pilot.press("escape")  # closes the picker
        card.expanded = False
        card.focus()
        await pilot.pause()
        await pilot.press("escape")
        assert app.composer.has_focus
        card.focus()
        await pilot.press("enter")  # the card's own keys still work
        assert card.expanded


async def test_help_screen_opens_with_f1_and_question_mark_and_closes_with_esc(
    runtime: Runtime, request: pytest.FixtureRequest
) -> None:
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("f1")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = screen_text(app)
        for key in ("Ctrl+N", "F2", "F4", "F8", "Ctrl+B", "Ctrl+L", "Ctrl+P", "Esc", "Ctrl+Q"):
            assert key in text, key
        assert_snapshot(request, app, "app_help_screen")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen))
        assert app.composer.has_focus
        # "?" in the composer is text; elsewhere it opens the help
        await pilot.press("?")
        assert app.composer.draft == "?"
        app.transcript.focus()
        await pilot.pause()
        await pilot.press("?")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen))


async def test_narrow_terminal(runtime: Runtime, request: pytest.FixtureRequest) -> None:
    app = make_app(runtime)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert not app.sidebar.has_class("-hidden")
        assert_snapshot(request, app, "app_80_columns")


# ----------------------------------------------------------- from test_composer_chips.py


async def test_picker_at_80_columns_snapshot(
    runtime: Runtime, request: pytest.FixtureRequest
) -> None:
    """The app's picker in an 80-column terminal: every age whole, rows aligned."""
    app = make_app(runtime)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await asyncio.wait_for(app.transcript.wait_until_settled(), 10)
        await pilot.press(*"compare with @")
        await workers_done(app)
        await pilot.pause()
        rows = app.composer.picker.row_texts
        assert len(rows) == 3
        assert all(row.rstrip().endswith("ago") for row in rows), rows
        assert_snapshot(request, app, "app_picker_80_columns")
