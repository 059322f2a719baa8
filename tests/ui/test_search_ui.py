"""Finding sessions by what was said in them in the TUI (issue 18): the ``@`` picker and the
session list filter list body matches after their own, each with a snippet whose matched
words are marked (styles on spans, never markup)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text

from core.log import NewEvent
from stores import SqliteSessionStore
from tests.ui.conftest import DAY, FIXED_NOW, MINUTE, SHOP, SIZE, exchange, make_app, title
from tests.ui.snapshots import assert_snapshot, pinned_environment
from tests.ui.test_app import settle, wait_for
from tui.shared.runtime import Runtime
from tui.shared.snippets import MATCH_STYLE

__all__ = ["pinned_environment"]  # autouse: the snapshots here are drawn in it


async def seed_retries(runtime: Runtime) -> None:
    """Three more sessions: one titled after retries, two that only talk about them."""
    specs = [
        ("retry-budget", SHOP, 8 * DAY, "Retry budget", "How much may we retry?", "Twice."),
        (
            "payments",
            SHOP,
            4 * DAY,
            "Payments incident",
            "What went wrong with the card charges last night?",
            "We settled the retry policy: three tries with backoff, then [bold]give up[/].",
        ),
        (
            "ci-flakes",
            "/home/dev/ci",
            6 * DAY,
            "CI flakes",
            "The network step fails now and then \x1b[31m(red)",
            "Wrap it in a RETRY loop.",
        ),
    ]
    store = runtime.store
    for session_id, cwd, age, name, question, answer in specs:
        created = FIXED_NOW - age
        await store.create_session(session_id, cwd=cwd, created_at=created)
        events: list[NewEvent] = [title(name, created + 1000)]
        events += exchange(question, answer, 1, created + MINUTE)
        await store.append_batch(session_id, events)


def marked(text: Text) -> list[str]:
    return [text.plain[s.start : s.end] for s in text.spans if MATCH_STYLE in str(s.style)]


async def test_picker_lists_body_matches_with_snippets(
    runtime: Runtime, request: pytest.FixtureRequest
) -> None:
    await seed_retries(runtime)
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        picker = app.composer.picker
        await pilot.press(*"see @retry")
        await wait_for(pilot, lambda: len(picker.row_texts) == 3)
        rows = picker.row_texts
        # The title match first (SPEC §4.4), then the body matches by relevance.
        assert [c.session_id for c in picker.candidates] == [
            "retry-budget",
            "ci-flakes",
            "payments",
        ]
        assert [h is None for h in picker.hits] == [True, False, False]
        assert "Wrap it in a RETRY loop." in rows[1]
        assert "We settled the retry policy" in rows[2]
        prompt = picker._rows.get_option_at_index(2).prompt
        assert isinstance(prompt, Text) and marked(prompt) == ["retry"]
        assert_snapshot(request, app, "app_picker_body_matches")
        await pilot.press("down", "down", "tab")
        assert app.composer.draft.startswith("see @[Payments incident](dsh-session:")


async def test_sidebar_filter_lists_body_matches_with_snippets(
    runtime: Runtime, request: pytest.FixtureRequest
) -> None:
    await seed_retries(runtime)
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        sidebar = app.sidebar
        await pilot.press("ctrl+l", *"retry")
        await wait_for(pilot, lambda: len(sidebar.visible_ids) == 3)
        assert sidebar.visible_ids == ["retry-budget", "ci-flakes", "payments"]
        label, detail = sidebar.row_lines(1)
        assert label.plain.strip() == "CI flakes"
        assert "Wrap it in a RETRY loop." in detail.plain and marked(detail) == ["RETRY"]
        _, detail = sidebar.row_lines(2)
        assert marked(detail) == ["retry"] and "\x1b" not in detail.plain
        # The title match keeps its age and cwd line.
        assert "/home/dev/shop" in sidebar.row_lines(0)[1].plain
        assert_snapshot(request, app, "app_sidebar_body_matches")
        # A narrower filter drops the stale body matches, then finds its own.
        await pilot.press(*" policy")
        await wait_for(pilot, lambda: sidebar.visible_ids == ["payments"])
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.current_id == "payments")
        # Clearing the filter lists everything again, without body matches.
        await pilot.press("ctrl+l", *["backspace"] * len("retry policy"))
        await wait_for(pilot, lambda: len(sidebar.visible_ids) == 7)
        assert all(" ago · " in sidebar.row_lines(i)[1].plain for i in range(7))


async def test_an_older_database_is_indexed_as_the_app_opens_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.config import DshConfig
    from tui.app.app import DshApp
    from tui.app.statusbar import NoticeBar

    path = tmp_path / "old.sqlite3"
    async with await SqliteSessionStore.open(path) as store:
        for k in range(25):
            await store.create_session(f"s{k}", cwd=SHOP, created_at=FIXED_NOW - DAY - k)
            await store.append_batch(
                f"s{k}", exchange(f"zeta{k:02d} omega", "ok", 1, FIXED_NOW - DAY)
            )
    with sqlite3.connect(path) as conn:  # as the upgrade step leaves it
        conn.execute("DELETE FROM search_messages")
        conn.execute("INSERT INTO search_pending (session) SELECT key FROM sessions")
    shown: list[str] = []
    original = NoticeBar.show_notice

    def spy(self: NoticeBar, message: str, *args: Any, **kwargs: Any) -> None:
        shown.append(message)
        original(self, message, *args, **kwargs)

    monkeypatch.setattr(NoticeBar, "show_notice", spy)
    app = DshApp(
        config=DshConfig(database=path), now=lambda: FIXED_NOW, cwd=SHOP, cursor_blink=False
    )
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert shown[0] == "Indexing messages for search: 20 of 25 sessions…"
        assert app.notice.visible_text == ""  # cleared once done
        await pilot.press(*"@zeta07")
        await wait_for(pilot, lambda: len(app.composer.picker.row_texts) == 1)
        assert "zeta07 omega" in app.composer.picker.row_texts[0]


async def test_a_read_only_database_says_which_sessions_search_cannot_find_yet(
    tmp_path: Path,
) -> None:
    # An upgrade's backlog left on a read-only file: search missed those sessions silently.
    from core.config import DshConfig
    from core.providers.offline import OfflineProvider
    from tui.shared.runtime import open_runtime

    path = tmp_path / "ro.sqlite3"
    async with await SqliteSessionStore.open(path) as store:
        for k in range(3):
            await store.create_session(f"s{k}", cwd=SHOP, created_at=FIXED_NOW - DAY - k)
            await store.append_batch(f"s{k}", exchange(f"zeta{k} omega", "ok", 1, FIXED_NOW))
    with sqlite3.connect(path) as conn:  # as the upgrade step leaves it
        conn.execute("DELETE FROM search_messages")
        conn.execute("INSERT INTO search_pending (session) SELECT key FROM sessions")
    store = await SqliteSessionStore.open(path, read_only=True)
    async with open_runtime(
        DshConfig(database=path), store=store, provider=OfflineProvider()
    ) as rt:
        app = make_app(rt)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            notice = app.notice.visible_text
            assert "read-only" in notice
            assert (
                "3 sessions are not indexed yet (the database is read-only); they are indexed "
                "the next time dsh opens it for writing." in notice
            )
            # Switching sessions shows it again with the read-only notice.
            app.switch_to("s1")
            await wait_for(pilot, lambda: app.current_id == "s1")
            await pilot.pause()
            assert "3 sessions are not indexed yet" in app.notice.visible_text
    await store.close()


async def test_opening_a_body_match_shows_its_message_from_an_older_page(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The sidebar row shows a snippet of message seq S; opening it showed the newest page
    # only, so the message (pages above) had to be hunted for by hand.
    created = FIXED_NOW - 9 * DAY
    await runtime.store.create_session("long-talk", cwd=SHOP, created_at=created)
    events: list[NewEvent] = [title("Long talk", created + 1000)]
    for turn in range(60):
        question = "the kappa budget is settled" if turn == 20 else f"filler question {turn}"
        events += exchange(question, f"filler answer {turn}", turn + 1, created + turn * MINUTE)
    await runtime.store.append_batch("long-talk", events)
    # Long enough that the polls below see the mark on a loaded machine, where one turn of
    # laying out the pages can take longer than half a second (a 0.5 s mark came and went
    # between two polls in a CI run).
    monkeypatch.setattr("tui.app.transcript.transcript.FOUND_MARK_S", 3.0)
    app = make_app(runtime)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.current_id != "long-talk"
        sidebar, transcript = app.sidebar, app.transcript
        await pilot.press("ctrl+l", *"kappa")
        await wait_for(pilot, lambda: sidebar.visible_ids == ["long-talk"])
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.current_id == "long-talk")
        await wait_for(pilot, lambda: bool(transcript.query(".-found")))
        found = transcript.query_one(".-found")
        assert "the kappa budget is settled" in str(found.render())
        assert transcript.hidden_count > 0  # only the pages down to it were loaded
        assert not transcript.following
        await pilot.pause()
        view = transcript.scrollable_content_region
        assert found.region.overlaps(view), "the message is in view"
        # The mark is brief.
        await wait_for(pilot, lambda: not found.has_class("-found"))
        # Opened otherwise (no body match), a session still shows its newest page.
        app.switch_to("long-talk")
        await pilot.pause()
        await settle(app, pilot)
        assert transcript.following and not transcript.query(".-found")
        # A stale hit (its message replaced or gone meanwhile) shows nothing.
        assert await transcript.reveal(10**6) is None
        assert not transcript.query(".-found")
