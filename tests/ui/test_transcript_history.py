"""Folded history in the transcript on its own (tui/app/transcript/history.py): what a
retry or an edit replaced is one folded item before the event that replaced it, the same
whether the surface is read whole or a page at a time; expanding it reads the replaced
events a page at a time; a failed read is one line."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from textual.widgets import Button

from core.errors import StoreError
from core.log import USER_MESSAGE, Event, NewEvent, Replace, user_message
from stores import SessionQuery
from tests.ui.test_transcript_unknown import page_to_start
from tests.ui.test_transcript_window import signature
from tests.ui.transcript_harness import TranscriptApp, assistant, new_session, settle, shown_text
from tui.app.transcript.history import HISTORY_PAGE, HistoryFold
from tui.app.transcript.transcript import AssistantMessage, UserMessage

SIZE = (100, 40)


async def edited_and_retried() -> tuple[SessionQuery, str, int]:
    """20 exchanges; the 8th question edited (what followed replaced); 10 more exchanges;
    the last reply retried. Returns the query, the session id and the edit's run length."""
    session = await new_session(session_id="s")
    for i in range(20):
        await session.append(NewEvent(USER_MESSAGE, user_message(f"q{i}"), "append"))
        await session.append(assistant(f"a{i}"))
    surface = await session.surface()
    run = tuple(e.seq for e in surface[14:])
    await session.store.append(
        "s",
        USER_MESSAGE,
        user_message("q7, edited"),
        surface_op=Replace(run[0], run[-1]),
        source_event_seqs=list(run),
    )
    await session.append(assistant("a7 again"))
    for i in range(20, 30):
        await session.append(NewEvent(USER_MESSAGE, user_message(f"q{i}"), "append"))
        await session.append(assistant(f"a{i}"))
    last = (await session.surface())[-1]
    await session.store.append(
        "s",
        "assistant/message",
        {"turn": 99, "step": 0, "message": dict(last.data["message"]) | {"id": "new"}},
        surface_op=Replace(last.seq, last.seq),
        source_event_seqs=[last.seq],
    )
    return session.query, "s", len(run)


@pytest.mark.parametrize("page", [2, 3, 5])
async def test_folds_are_placed_alike_read_whole_or_by_pages(page: int) -> None:
    query, sid, replaced = await edited_and_retried()
    surface = list((await query.read_surface(sid)).events)
    whole = TranscriptApp(surface, page_size=page)
    async with whole.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await page_to_start(whole.transcript)
        await settle(pilot)
        expected = [signature(w) for w in whole.transcript.item_widgets]
        folds = [w for w in whole.transcript.item_widgets if isinstance(w, HistoryFold)]
    assert [f.title_text().plain for f in folds] == [
        f"Edited — {replaced} earlier messages",
        "Earlier attempt",
    ]
    # Each fold comes right before the event that replaced what it holds.
    kinds = [s[0] for s in expected]
    first = kinds.index("HistoryFold")
    assert expected[first + 1][0] == "user" and expected[first + 1][1].endswith("\nq7, edited")
    assert kinds[-2:] == ["HistoryFold", "AssistantMessage"]

    async def fetch(seqs: Sequence[int]) -> list[Event]:
        return await query.read_events_at(sid, seqs)

    app = TranscriptApp(page_size=page)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        window = await query.read_surface_window(sid, page + 1)
        await app.transcript.load_window(window, fetch)
        await settle(pilot)
        await page_to_start(app.transcript)
        await settle(pilot)
        assert [signature(w) for w in app.transcript.item_widgets] == expected


async def test_an_expanded_fold_reads_a_page_at_a_time() -> None:
    query, sid, replaced = await edited_and_retried()
    assert replaced > HISTORY_PAGE
    reads: list[list[int]] = []

    async def fetch(seqs: Sequence[int]) -> list[Event]:
        reads.append(list(seqs))
        return await query.read_events_at(sid, seqs)

    app = TranscriptApp(page_size=100)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await app.transcript.load_window(await query.read_surface_window(sid, 100), fetch)
        await settle(pilot)
        reads.clear()
        fold = next(w for w in app.transcript.item_widgets if isinstance(w, HistoryFold))
        assert fold.body is None  # nothing read before it is opened
        fold.focus()
        await pilot.press("enter")
        await settle(pilot)
        assert reads == [list(fold.seqs[:HISTORY_PAGE])]
        assert fold.shown_count == HISTORY_PAGE
        left = replaced - HISTORY_PAGE
        more = fold.query_one(".history-more", Button)
        assert more.display and str(more.label) == f"Show {left} more"
        nested = [w for w in fold.query(UserMessage)] + [w for w in fold.query(AssistantMessage)]
        assert len(nested) == HISTORY_PAGE and not any(w.can_focus for w in nested)
        more.press()
        await settle(pilot)
        assert reads[-1] == list(fold.seqs[HISTORY_PAGE:])
        assert fold.shown_count == replaced and not more.display
        texts = shown_text(fold)
        assert "q7" in texts and "a19" in texts and "q7, edited" not in texts


async def test_a_fold_whose_read_fails_says_so_in_one_line() -> None:
    query, sid, _ = await edited_and_retried()

    async def fetch(seqs: Sequence[int]) -> list[Event]:
        raise StoreError("disk\nvanished \x1b[31m")

    app = TranscriptApp(page_size=100)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await app.transcript.load_window(await query.read_surface_window(sid, 100), fetch)
        await settle(pilot)
        fold = next(w for w in app.transcript.item_widgets if isinstance(w, HistoryFold))
        fold.expanded = True
        await settle(pilot)
        text = shown_text(fold)
        assert "Could not read the earlier messages: disk\\nvanished \\x1b[31m" in text
        assert "\x1b" not in text and fold.shown_count == 0


async def test_a_transcript_without_a_reader_says_where_the_replaced_events_are() -> None:
    query, sid, _ = await edited_and_retried()
    app = TranscriptApp(list((await query.read_surface(sid)).events))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        fold = [w for w in app.transcript.item_widgets if isinstance(w, HistoryFold)][-1]
        fold.expanded = True
        await settle(pilot)
        assert "(the replaced messages are in the session's log)" in shown_text(fold)
